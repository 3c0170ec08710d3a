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
"""

from __future__ import annotations

import contextlib
import queue
import time
from collections.abc import Callable
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

__all__ = ["UploadDecoders"]

UploadResult = LoadedImage | ReadImage | Exception


def _failure(task: UploadTask, exc: Exception) -> Exception:
    """A worker's crash or timeout as the upload's own image error (422), by its name."""
    return named_failure(task[1], exc)


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

    def load(self, file: BinaryIO, name: str, spec: InputSpec, device: torch.device) -> LoadedImage:
        """Decode, fit and make the display copy of an open upload, as `load_for_model`
        does (blocking: call it from a thread holding a decode slot).

        Raises:
            ImageError: (a subclass) the upload is unreadable, unsupported or too large;
                `DecoderFailedError`: its decoder crashed or ran past the time limit.
        """
        on_device = device.type == "cuda"  # fitted where `load_for_model` fits it
        pool = self._take(name)
        try:
            results = list(pool.map([(OpenFile(file.fileno()), name, spec, not on_device)]))
        finally:
            self._free.put(pool)
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
