"""A batch's images read ahead of the model, in worker processes.

`batch.engine.run` opens `BatchProcessor.reading_ahead(items)` around its chunks. With
`read_workers` > 0 this starts a `ReadAhead` over the run's image items: a thread fetches
each item's file (`Source.local_path`, a download for a DICOMweb source) and hands it to a
`models.decode_pool.DecodePool` running the one image path (`load_task`: decode, fit to
the model input, fingerprint, the training set's display copy). Results come back in
the run's order, a bounded number ahead, while the model predicts the chunk before.

Before this, a run read its images one at a time in its own thread, between forward
passes: on a GPU the model waited for the decoder, and a decoder that crashed took the
process with it (`batch.engine.run_resumed` then gave the file up after two deaths).
In a worker, a crash or a file past the per-file limit is that file's failure at once.
"""

from __future__ import annotations

import contextlib
import logging
import threading
from collections import deque
from collections.abc import Callable, Generator, Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

from batch.interfaces import Source, SourceItem

if TYPE_CHECKING:
    from models.image_pipeline import DecodeTask, InputSpec, LoadedImage

__all__ = ["FetchedImage", "ReadAhead", "ReadCancelled", "decode_failure"]

log = logging.getLogger(__name__)


class ReadCancelled(RuntimeError):
    """The run was stopped while waiting for an image (the item stays pending)."""


@dataclass
class FetchedImage:
    """One image item as the read-ahead hands it over.

    Attributes:
        item: the item.
        path: its local file (None: fetching it failed; `image` says why).
        image: the decoded, fitted image, or why fetching or decoding it failed.
    """

    item: SourceItem
    path: Path | None
    image: LoadedImage | Exception


def decode_failure(task: DecodeTask, exc: Exception) -> Exception:
    """A file's failure in a decoding worker as its error: a crash or a timeout of the
    worker is named after the file (`batch.scan.describe_error` puts the item's key in
    place of the path), a decoder's own exception is kept as raised."""
    from models.decode_pool import named_failure

    return named_failure(task[0], exc)


class ReadAhead:
    """Fetches and decodes `images` in worker processes, in order, ahead of `take`.

    Args:
        source: where the items' files are (`local_path`, `release`).
        images: the image items of the run, in the order the caller will `take` them.
        spec: how images are fitted (`models.image_pipeline.InputSpec`).
        workers: decoding processes (at least 1).
        timeout_s: a file decoding longer fails (None: no limit).
        depth: images decoded or waiting beyond the one taken (bounds memory: each holds
            a fitted image and the optional display copy).
        fn: the workers' function (tests pass one that crashes); default `load_task`.

    Items fetched and not taken by `close` are released (`Source.release`), so a stopped
    run leaves no downloaded copy behind.
    """

    def __init__(
        self,
        source: Source,
        images: Sequence[SourceItem],
        spec: InputSpec,
        *,
        workers: int,
        timeout_s: float | None,
        depth: int,
        fn: Callable[[DecodeTask], LoadedImage] | None = None,
    ) -> None:
        from models.decode_pool import DecodePool, Prefetch
        from models.image_pipeline import load_task

        if workers < 1:
            raise ValueError(f"a read-ahead needs at least one worker, got {workers}")
        self._source = source
        self._spec = spec
        self._lock = threading.Lock()
        self._closed = False
        self._unclaimed: dict[str, SourceItem] = {}  # fetched, not yet taken
        # Fetched items in task order; a failed fetch has no task, only its error here.
        self._fetched: deque[tuple[SourceItem, Path | None, Exception | None]] = deque()
        self._pool: DecodePool[DecodeTask, LoadedImage | Exception] = DecodePool(
            fn or load_task,
            workers=workers,
            on_error=decode_failure,
            timeout_s=timeout_s,
            max_ahead=depth,
        )
        self._results = self._decoded(images)
        self._stream = Prefetch(self._results, depth=depth, name="cxr-batch-read-ahead")

    def _tasks(self, images: Sequence[SourceItem]) -> Iterator[DecodeTask]:
        for item in images:
            try:
                path = self._source.local_path(item)
            except Exception as exc:  # noqa: BLE001 - that item's failure (a download)
                self._fetched.append((item, None, exc))
                continue
            with self._lock:
                if self._closed:  # the run stopped while this one was downloading
                    self._release(item)
                    return
                self._unclaimed[item.key] = item
            self._fetched.append((item, path, None))
            yield (str(path), self._spec, "dicom" if item.kind == "image" else "auto")

    def _decoded(self, images: Sequence[SourceItem]) -> Generator[FetchedImage, None, None]:
        decoded = self._pool.map(self._tasks(images))
        try:
            for image in decoded:  # in task order: the first fetched entry with a path
                yield from self._failed_fetches()
                item, path, _ = self._fetched.popleft()
                yield FetchedImage(item, path, image)
            yield from self._failed_fetches()
        finally:
            decoded.close()

    def _failed_fetches(self) -> Iterator[FetchedImage]:
        while self._fetched and self._fetched[0][1] is None:
            item, _, error = self._fetched.popleft()
            assert error is not None
            yield FetchedImage(item, None, error)

    def take(
        self, item: SourceItem, *, cancelled: Callable[[], bool] | None = None
    ) -> FetchedImage:
        """The next image, which must be `item`; the caller releases it when done.

        Args:
            item: the item the caller processes now.
            cancelled: checked while waiting: a file that hangs its worker must not hold
                up a cancelled run until the per-file limit.

        Raises:
            ReadCancelled: `cancelled` turned true while waiting.
            RuntimeError: the caller asks out of order (a bug), or past the last image.
        """
        while cancelled is not None and not self._stream.ready(0.1):
            if cancelled():
                raise ReadCancelled(f"{item.key}: the run was stopped while it was read")
        got = next(self._stream, None)
        if got is None or got.item.key != item.key:
            found = "nothing" if got is None else repr(got.item.key)
            raise RuntimeError(f"read-ahead out of step: asked for {item.key!r}, has {found}")
        with self._lock:
            self._unclaimed.pop(item.key, None)
        return got

    def close(self) -> None:
        """Stop reading, stop the workers and release what was fetched but not taken."""
        with self._lock:
            self._closed = True
        self._pool.interrupt()  # the thread may be waiting on a hung file's worker
        self._stream.close()
        # Normally done: the thread ended. A download that ignored the source's interrupt
        # is still running it; the pool's close below stops the workers all the same.
        with contextlib.suppress(ValueError):
            self._results.close()
        self._pool.close()
        with self._lock:
            left = list(self._unclaimed.values())
            self._unclaimed.clear()
        for item in left:
            self._release(item)

    def _release(self, item: SourceItem) -> None:
        try:
            self._source.release(item)
        except Exception:  # noqa: BLE001 - cleanup must not hide how the run ended
            log.warning("could not release batch item %s", item.key, exc_info=True)
