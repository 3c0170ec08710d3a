"""Received instances decoded in parallel slots, handed on in the order they finish.

`cxr listen` used to decode what it received one instance at a time, in arrival order, in
one worker process: an instance that decoded for minutes held every real instance behind
it (issue 42: bombs at 300 s each delayed twelve real instances by up to 25 minutes).
Here each received instance goes to the first free of `slots` single-worker decoding
processes (`batch.processor.decode_pool`: a crash or the time limit fails that instance
alone), and is handed to the listener's worker as soon as its image is ready, so a slow
instance holds one slot and the instances behind it pass it. The worker's processor takes
the decoded image from here (`lookup_pool`) instead of decoding it again.

Markers in the stream (a `threading.Event` that `wait_idle` waits on, the stop marker)
are handed on only once every instance received before them is handed on: "idle" and
"stop" keep their meaning.
"""

from __future__ import annotations

import queue
import threading
from pathlib import Path
from typing import TYPE_CHECKING, Any

from batch.inbox_source import InboxSource
from batch.processor import decode_pool
from batch.read_ahead import decode_failure

if TYPE_CHECKING:
    from models.decode_pool import DecodePool
    from models.image_pipeline import DecodeTask, InputSpec, LoadedImage

__all__ = ["DecodeSlots"]

_SLOT_STOP = object()


class DecodeSlots:
    """Decode received instances in `slots` worker processes; pass them on as they finish.

    Args:
        source: the inbox the instances are in.
        spec: the model input the images are fitted to.
        slots: decoding processes (each one image at a time).
        timeout_s: one image's decoding limit (None: none).
        incoming: (uid, calling AE) entries and markers, in arrival order.
        ready: where entries go once decoded (markers once all before them have).
        stop: the marker that ends the stream.
    """

    def __init__(
        self,
        source: InboxSource,
        spec: InputSpec,
        *,
        slots: int,
        timeout_s: float | None,
        incoming: queue.Queue[Any],
        ready: queue.Queue[Any],
        stop: object,
    ) -> None:
        if slots < 1:
            raise ValueError(f"decode slots must be at least 1, got {slots}")
        self.source = source
        self.spec = spec
        self.incoming = incoming
        self.ready = ready
        self.stop_marker = stop
        self._pools = [decode_pool(workers=1, timeout_s=timeout_s) for _ in range(slots)]
        self._work: queue.Queue[Any] = queue.Queue()
        self._decoded: dict[str, LoadedImage | Exception] = {}
        self._lock = threading.Condition()
        self._in_flight = 0
        self._threads = [
            threading.Thread(target=self._slot, args=(pool,), name=f"cxr-decode-{i}", daemon=True)
            for i, pool in enumerate(self._pools)
        ]
        self._threads.append(
            threading.Thread(target=self._dispatch, name="cxr-decode-dispatch", daemon=True)
        )

    def start(self) -> None:
        """Start the slots and the dispatcher (the processes start at the first image)."""
        for thread in self._threads:
            thread.start()

    def lookup_pool(self) -> DecodePool[DecodeTask, LoadedImage | Exception]:
        """A pool for `BatchProcessor.decode_pool` that hands over the images decoded here
        (one not decoded here, which should not happen, is decoded in the caller)."""
        from models.decode_pool import DecodePool

        return DecodePool(self._take, workers=0, on_error=decode_failure)

    def join(self, timeout: float) -> None:
        """Wait for the dispatcher and the slots to end (after the stop marker)."""
        for thread in self._threads:
            thread.join(timeout)

    def close(self) -> None:
        """Stop the decoding processes (a decode still running fails)."""
        for pool in self._pools:
            pool.close()

    def _take(self, task: DecodeTask) -> LoadedImage | Exception:
        with self._lock:
            found = self._decoded.pop(task[0], None)
        if found is not None:
            return found
        from models.image_pipeline import load_task

        return load_task(task)

    # --- threads ------------------------------------------------------------------------

    def _dispatch(self) -> None:
        while True:
            entry = self.incoming.get()
            if isinstance(entry, tuple):
                with self._lock:
                    self._in_flight += 1
                self._work.put(entry)
                continue
            with self._lock:  # a marker: after everything received before it
                self._lock.wait_for(lambda: self._in_flight == 0)
            if entry is self.stop_marker:
                for _ in self._pools:
                    self._work.put(_SLOT_STOP)
                self.ready.put(entry)
                return
            self.ready.put(entry)

    def _slot(self, pool: DecodePool[DecodeTask, LoadedImage | Exception]) -> None:
        while (entry := self._work.get()) is not _SLOT_STOP:
            try:
                self._decode(pool, entry[0])
            finally:
                self.ready.put(entry)
                with self._lock:
                    self._in_flight -= 1
                    self._lock.notify_all()

    def _decode(self, pool: DecodePool[DecodeTask, LoadedImage | Exception], uid: str) -> None:
        try:
            item = self.source.item(uid)
        except Exception:  # noqa: BLE001 - the processor records what is wrong with it
            return
        if item.kind not in ("image", "bitmap"):
            return
        path: Path = self.source.local_path(item)
        kind: Any = "dicom" if item.kind == "image" else "auto"
        results = list(pool.map([(str(path), self.spec, kind)]))
        if results:
            with self._lock:
                self._decoded[str(path)] = results[0]
