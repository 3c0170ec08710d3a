"""Image uploads decoded in worker processes: a decoder that crashes or hangs on an upload
fails that request (422), never the service.

`POST /v1/images/predict` hands its spooled upload to one of `CXR_MAX_CONCURRENT_DECODES`
single-worker pools (`models.decode_pool`), each decoding one upload at a time. The worker
gets a duplicate of the upload's file descriptor (`models.image_pipeline.OpenFile`): the
spooled file keeps no name on disk and its bytes are not copied through a pipe; the fitted
image comes back through the pool's shared memory. Beside a GPU the worker only decodes
and the image is fitted on the device here, as `load_for_model(device=...)` did in the
service's own threads.

Decoded in the service's own process, an upload that crashed a codec (a signal in a C
decoder) took the service down with every request in flight, and one that hung its decoder
held a decode slot for good: two of them, and no image could be predicted until a restart.

A decode nobody waits for any more (its client has gone) is stopped through a
`Cancellation`: its worker is killed and replaced, so a slow codestream whose sender
disconnects frees its slot at once instead of at the time limit.
"""

from __future__ import annotations

import contextlib
import queue
import threading
import time
from collections.abc import Callable, Iterator
from typing import TYPE_CHECKING, BinaryIO

from models.decode_pool import DecodePool, named_failure
from models.image_pipeline import (
    InputSpec,
    LoadedImage,
    OpenFile,
    ReadImage,
    UploadTask,
    fit_read,
    load_upload_task,
)

if TYPE_CHECKING:
    import torch

__all__ = ["Cancellation", "DecodeCancelled", "UploadDecoders"]

UploadResult = LoadedImage | ReadImage | Exception


def _failure(task: UploadTask, exc: Exception) -> Exception:
    """A worker's crash or timeout as the upload's own image error (422), by its name."""
    return named_failure(task[1], exc)


class DecodeCancelled(RuntimeError):
    """The upload's decode was stopped through its `Cancellation` (nobody wants it)."""


class Cancellation:
    """Lets another thread stop one upload's decode (`UploadDecoders.load(cancel=...)`).

    `cancel()` kills the worker decoding the upload (it is replaced: `DecodePool.abandon`),
    or, called before the decode began, keeps it from starting; `load` then raises
    `DecodeCancelled`.
    """

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._pool: DecodePool[UploadTask, UploadResult] | None = None
        self.cancelled = False

    def cancel(self) -> None:
        """Stop the decode now (idempotent; after the decode ended, nothing happens)."""
        with self._lock:
            self.cancelled = True
            if self._pool is not None:
                self._pool.abandon()

    @contextlib.contextmanager
    def running_in(self, pool: DecodePool[UploadTask, UploadResult], name: str) -> Iterator[None]:
        """While the block runs, `cancel` kills `pool`'s busy worker."""
        with self._lock:
            if self.cancelled:
                raise DecodeCancelled(f"{name}: not decoded, it was cancelled")
            self._pool = pool
        try:
            yield
        finally:
            with self._lock:
                self._pool = None
                if self.cancelled:
                    pool.resume()


class UploadDecoders:
    """Decoding worker processes for uploads, one upload per worker at a time.

    Args:
        workers: processes, each decoding one upload at a time (the service's decode slots).
        timeout_s: an upload decoding longer fails, its worker killed (None: no limit).
        fn: the workers' function (tests pass one that crashes); default `load_upload_task`.

    Workers start at the first upload and are replaced after a crash or a timeout.
    """

    def __init__(
        self,
        workers: int,
        *,
        timeout_s: float | None,
        fn: Callable[[UploadTask], LoadedImage | ReadImage] = load_upload_task,
    ) -> None:
        if workers < 1:
            raise ValueError(f"upload decoding needs at least one worker, got {workers}")
        self._pools = [
            DecodePool(fn, workers=1, on_error=_failure, timeout_s=timeout_s)
            for _ in range(workers)
        ]
        self._closed = False
        self._free: queue.SimpleQueue[DecodePool[UploadTask, UploadResult]] = queue.SimpleQueue()
        for pool in self._pools:
            self._free.put(pool)

    def load(
        self,
        file: BinaryIO,
        name: str,
        spec: InputSpec,
        device: torch.device,
        cancel: Cancellation | None = None,
    ) -> LoadedImage:
        """Decode, fit and make the display copy of an open upload, as `load_for_model`
        does (blocking: call it from a thread holding a decode slot).

        Args:
            cancel: stops the decode from another thread (its worker is killed).

        Raises:
            ImageError: (a subclass) the upload is unreadable, unsupported or too large;
                `DecoderFailedError`: its decoder crashed or ran past the time limit.
            DecodeCancelled: `cancel` stopped it.
        """
        on_device = device.type == "cuda"  # fitted where `load_for_model` fits it
        pool = self._take(name)
        task = (OpenFile(file.fileno()), name, spec, not on_device)
        try:
            with cancel.running_in(pool, name) if cancel else contextlib.nullcontext():
                results = list(pool.map([task]))
        finally:
            self._free.put(pool)
        if cancel is not None and cancel.cancelled:
            raise DecodeCancelled(f"{name}: its decode was stopped, nobody waits for it")
        if not results:  # `close` interrupted it
            raise RuntimeError(f"{name}: not decoded, the service is stopping")
        (result,) = results
        if isinstance(result, Exception):
            raise result
        if isinstance(result, ReadImage):
            return fit_read(result, spec, device)
        return result

    def _take(self, name: str) -> DecodePool[UploadTask, UploadResult]:
        # A thread holding a decode slot finds a pool free at once; the wait is for `close`.
        while not self._closed:
            try:
                return self._free.get(timeout=0.5)
            except queue.Empty:
                continue
        raise RuntimeError(f"{name}: not decoded, the service is stopping")

    def close(self, wait_s: float = 5.0) -> None:
        """Stop the workers: a decode still running ends at once and fails (the service is
        stopping); its thread is given `wait_s` to hand its pool back first."""
        self._closed = True
        for pool in self._pools:
            pool.interrupt()
        deadline = time.monotonic() + wait_s
        for _ in self._pools:  # each pool once back: no thread is in it any more
            with contextlib.suppress(queue.Empty):
                self._free.get(timeout=max(0.0, deadline - time.monotonic()))
        for pool in self._pools:
            pool.close()
