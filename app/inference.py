"""Model inference off the event loop, with micro-batching of concurrent requests.

Requests put their image on an asyncio queue; one worker task takes up to
`max_batch` images that arrive within `max_wait_s` of the first and runs one
`Predictor.predict` call in a dedicated thread. On a GPU this turns N concurrent
requests into one forward pass; on CPU it keeps torch from being entered by many
threads at once. Heatmap helpers live here too (compact storage, overlay render).
"""

from __future__ import annotations

import asyncio
import contextlib
import functools
import io
import logging
import time
from collections import Counter
from collections.abc import Awaitable, Callable
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import TYPE_CHECKING, Any, TypeVar

import numpy as np

from app.service_metrics import Metrics

if TYPE_CHECKING:  # models.predict imports torch: the service loads it only with a model
    from models.heatmaps import Heatmap
    from models.precision import Precision
    from models.predict import Prediction, Predictor, PreparedImage
    from models.upload_decoding import UploadDecoders

    #: What waits in the queue: an image and the future its request awaits.
    _Item = tuple[PreparedImage | np.ndarray, asyncio.Future[Prediction]]

__all__ = [
    "InferenceQueue",
    "release_freed_memory",
    "decode_heatmap",
    "decode_preview",
    "encode_heatmaps",
    "encode_preview",
    "load_model",
]

log = logging.getLogger(__name__)

T = TypeVar("T")

#: Seconds without a decode after which freed memory is handed back (`trim_when_idle`).
TRIM_IDLE_S = 0.25


def release_freed_memory() -> None:
    """Give freed heap memory back to the OS (glibc `malloc_trim`); a no-op elsewhere.

    Decoding a large image frees hundreds of MB, partly in the per-thread malloc arenas of
    the worker threads; glibc keeps those pages, so an idle server would keep growing
    after large uploads (issue 7, item 5). The service calls it once it is idle
    (`InferenceQueue.trim_when_idle`): each call makes the next decode fault its memory
    in afresh.
    """
    trim = _malloc_trim()
    if trim is not None:
        trim(0)


@functools.cache
def _malloc_trim() -> Callable[[int], int] | None:
    # Looked up once: `find_library` runs `ldconfig` in a subprocess (2 ms).
    import ctypes
    import ctypes.util

    name = ctypes.util.find_library("c")
    if not name:
        return None
    try:
        trim: Callable[[int], int] = ctypes.CDLL(name).malloc_trim
    except (OSError, AttributeError):  # not glibc (musl, macOS): nothing to do
        return None
    return trim


def load_model(path: str | Path, device: str = "auto", precision: Precision = "auto") -> Predictor:
    """Load a checkpoint with `models.predict.load_predictor`.

    Raises:
        models.errors.CheckpointError: unreadable or incompatible checkpoint.
        models.errors.ModelsError: no such device, or an unknown precision.
    """
    from models.predict import load_predictor

    predictor = load_predictor(path, device=device, precision=precision)
    # A lone upload is the service's usual batch: its LayerCAM pass replays as CUDA graphs
    # (captured now, before any request's thread uses the device; nothing off CUDA).
    predictor.capture_graphs([1])
    return predictor


async def _acquire(slots: asyncio.Semaphore, gone: Callable[[], Awaitable[object]] | None) -> None:
    """Take a decode slot, or raise `ClientGone` if `gone` returns (or fails) first.

    On any way out but success the slot is not held (even one taken at the last moment)."""
    from app.errors import ClientGone

    if gone is None or not slots.locked():
        await slots.acquire()
        return
    acquire = asyncio.ensure_future(slots.acquire())
    watch = asyncio.ensure_future(gone())
    success = False
    try:
        await asyncio.wait({acquire, watch}, return_when=asyncio.FIRST_COMPLETED)
        if watch.done():
            raise ClientGone("the client closed its connection before its upload was decoded")
        success = True
    finally:
        watch.cancel()
        if not acquire.done():
            acquire.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await acquire
        if not success and acquire.done() and not acquire.cancelled():
            slots.release()


async def _unless_gone(
    work: Awaitable[T], gone: Callable[[], Awaitable[object]], cancel: Callable[[], None]
) -> T:
    """`work`'s result, or `ClientGone` once `gone` returns (or fails) first, after `cancel`
    stopped the work. Cancelled itself, it cancels the work too. Either way it returns only
    once the work has ended, so the decode slot its caller holds is never freed early."""
    from app.errors import ClientGone

    task = asyncio.ensure_future(work)
    watch = asyncio.ensure_future(gone())
    left = False
    try:
        await asyncio.wait({task, watch}, return_when=asyncio.FIRST_COMPLETED)
        left = not task.done()
    finally:
        watch.cancel()
        if not task.done():
            cancel()  # the client has gone, or this request was cancelled
            while not task.done():  # the worker is killed: the thread ends at once
                with contextlib.suppress(asyncio.CancelledError):
                    await asyncio.wait({task})
            if not task.cancelled():
                task.exception()  # seen: the answer goes to nobody
    if left:
        raise ClientGone("the client closed its connection while its upload was decoded")
    return task.result()


class InferenceQueue:
    """Micro-batching front of a predictor; start() and stop() inside the event loop.

    It also bounds the full-resolution decodes that feed it (`decode`): at most
    `max_decodes` at once, process-wide, whatever the number of concurrent uploads, and
    hands the memory they freed back to the OS once none has run for `trim_idle_s`.
    """

    def __init__(
        self,
        predictor: Predictor,
        *,
        max_batch: int,
        max_wait_s: float,
        max_decodes: int = 2,
        max_waiting: int = 32,
        max_per_client: int = 4,
        metrics: Metrics | None = None,
        trim_idle_s: float = TRIM_IDLE_S,
        decoders: UploadDecoders | None = None,
    ) -> None:
        self.predictor = predictor
        self.decoders = decoders  # uploads decoded in worker processes; closed by `stop`
        self.max_batch = max_batch
        self.max_wait_s = max_wait_s
        self.max_decodes = max_decodes
        self.max_waiting = max_waiting
        self.max_per_client = max_per_client
        self.trim_idle_s = trim_idle_s
        self.metrics = metrics
        self._queue: asyncio.Queue[_Item] | None = None
        self._task: asyncio.Task[None] | None = None
        self._decode_slots: asyncio.Semaphore | None = None
        self._decoding = 0  # requests in `decode` (running or waiting for a slot)
        self._clients: Counter[str] = Counter()  # the same, by client
        self._waiting = 0  # requests waiting for a slot
        self._trim: asyncio.TimerHandle | None = None
        self._executor = ThreadPoolExecutor(max_workers=1, thread_name_prefix="cxr-inference")

    async def start(self) -> None:
        """Start the worker task."""
        self._queue = asyncio.Queue()
        self._decode_slots = asyncio.Semaphore(self.max_decodes)
        self._task = asyncio.create_task(self._run(), name="cxr-inference-queue")

    async def decode(
        self,
        fn: Callable[..., T],
        *args: Any,
        client: str = "",
        gone: Callable[[], Awaitable[object]] | None = None,
        cancel: Callable[[], None] | None = None,
    ) -> T:
        """Run `fn(*args)`, a full-resolution decode, in a worker thread once a slot is free.

        Each decode holds its image at full resolution (about 6 bytes a pixel: 0.3 GB for
        50 megapixels, issue 18 item 13), so the slots bound the service's decode memory;
        requests waiting for one hold only their spooled upload (on disk) and no thread.
        The wait is bounded too: at most `max_waiting` uploads wait, and `client` (when
        named) has at most `max_per_client` decoding or waiting (issue 42: 50 decode bombs
        from one client held image prediction for 25 minutes). An upload whose client has
        gone (`gone` returned) while it waited is dropped undecoded; with `cancel`, one
        whose client goes while it decodes is stopped (`cancel` is called: it kills the
        decoding worker), so a slow file whose sender leaves frees its slot at once rather
        than at CXR_DECODE_TIMEOUT_S. A cancelled request keeps its slot until its thread
        is done. Once the decodes stop, the memory they freed is handed back
        (`trim_when_idle`).

        Raises:
            DecodeQueueFull: the queue, or this client's share of it, is full (503).
            ClientGone: `gone` returned before a slot was free, or (with `cancel`) before
                the decode ended (499).
        """
        from starlette.concurrency import run_in_threadpool

        from app.errors import DecodeQueueFull

        slots = self._decode_slots
        if slots is None:
            raise RuntimeError("InferenceQueue.start() was not called")
        if slots.locked() and self._waiting >= self.max_waiting:
            raise DecodeQueueFull(
                f"{self._waiting} image uploads already wait for a decode slot "
                "(CXR_MAX_WAITING_DECODES); retry shortly"
            )
        if client and self._clients[client] >= self.max_per_client:
            raise DecodeQueueFull(
                f"this client already has {self._clients[client]} image uploads decoding or "
                "waiting (CXR_MAX_DECODES_PER_CLIENT); send the next once one is answered"
            )
        self._decoding += 1
        self._clients[client] += 1
        try:
            self._waiting += 1
            try:
                await _acquire(slots, gone)
            finally:
                self._waiting -= 1
            try:
                if gone is None or cancel is None:
                    return await run_in_threadpool(fn, *args)
                return await _unless_gone(run_in_threadpool(fn, *args), gone, cancel)
            finally:
                slots.release()
        finally:
            self._decoding -= 1
            self._clients[client] -= 1
            if not self._clients[client]:
                del self._clients[client]
            self.trim_when_idle()

    def trim_when_idle(self) -> None:
        """Hand freed heap memory back to the OS once no decode has run for `trim_idle_s`.

        Called after each decode (`decode`). Trimming right after every large one made the
        next decode fault its 30-100 MB in afresh (15 ms of a 2500 x 2048 DICOM's 37 on a
        2-core VM); a server answering requests back to back reuses that memory instead,
        and trims when the requests stop.
        """
        if self._trim is not None:
            self._trim.cancel()
        self._trim = asyncio.get_running_loop().call_later(self.trim_idle_s, self._trim_if_idle)

    def _trim_if_idle(self) -> None:
        self._trim = None
        if self._decoding:  # another decode is under way: wait for the quiet after it
            self.trim_when_idle()
            return
        done = asyncio.get_running_loop().run_in_executor(None, release_freed_memory)
        done.add_done_callback(lambda f: f.cancelled() or f.exception())

    async def stop(self) -> None:
        """Stop the worker; pending requests get a RuntimeError."""
        if self._trim is not None:
            self._trim.cancel()
            self._trim = None
        if self._task is not None:
            self._task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self._task
        if self._queue is not None:
            while not self._queue.empty():
                _, fut = self._queue.get_nowait()
                if not fut.done():
                    fut.set_exception(RuntimeError("the service is shutting down"))
        self._executor.shutdown(wait=True)
        if self.decoders is not None:
            self.decoders.close()

    async def predict(self, image: PreparedImage | np.ndarray) -> Prediction:
        """Predict one image.

        Args:
            image: a `models.predict.PreparedImage` (small; what the service sends), or
                float32 (rows, cols) pixels in [0, 1].

        Returns:
            The predictor's `Prediction` for this image.
        """
        if self._queue is None:
            raise RuntimeError("InferenceQueue.start() was not called")
        future: asyncio.Future[Prediction] = asyncio.get_running_loop().create_future()
        await self._queue.put((image, future))
        return await future

    async def _collect(self) -> list[_Item]:
        assert self._queue is not None  # for mypy: start() set it
        loop = asyncio.get_running_loop()
        batch = [await self._queue.get()]
        # Wait for companions only when some are on their way (decoding): a lone request
        # goes at once instead of paying `max_wait_s` for a batch that will not come.
        wait = self.max_wait_s if self._decoding else 0.0
        deadline = loop.time() + wait
        while len(batch) < self.max_batch:
            remaining = deadline - loop.time()
            try:
                if remaining <= 0:
                    batch.append(self._queue.get_nowait())
                else:
                    batch.append(await asyncio.wait_for(self._queue.get(), remaining))
            except (TimeoutError, asyncio.QueueEmpty):
                break
        return [(p, f) for p, f in batch if not f.cancelled()]

    async def _run(self) -> None:
        while True:
            batch = await self._collect()
            if batch:
                await self._serve(batch)
            # Drop this batch's images now, not when the next request arrives: an idle
            # server must not keep the last request's arrays alive.
            del batch

    async def _serve(self, batch: list[_Item]) -> None:
        loop = asyncio.get_running_loop()
        start = time.perf_counter()
        try:
            results = await loop.run_in_executor(
                self._executor, self.predictor.predict, [p for p, _ in batch]
            )
        except Exception as exc:  # noqa: BLE001 - delivered to the waiting requests
            if len(batch) == 1:
                if not batch[0][1].done():
                    batch[0][1].set_exception(exc)
                return
            # One bad image must not fail its neighbours: retry one at a time.
            for image, fut in batch:
                try:
                    (single,) = await loop.run_in_executor(
                        self._executor, self.predictor.predict, [image]
                    )
                except Exception as one_exc:  # noqa: BLE001
                    if not fut.done():
                        fut.set_exception(one_exc)
                else:
                    if not fut.done():
                        fut.set_result(single)
            return
        if self.metrics is not None:
            self.metrics.inference_seconds.observe(time.perf_counter() - start)
            self.metrics.inference_batch_size.observe(len(batch))
        for (_, fut), result in zip(batch, results, strict=True):
            if not fut.done():
                fut.set_result(result)


def encode_heatmaps(heatmaps: dict[str, Heatmap]) -> bytes:
    """Pack map-resolution heatmaps into a small .npz (a few KiB whatever the image size).

    Each label's float16 (S, S) map is stored as is, with the `Geometry` that maps it onto
    the original image; `decode_heatmap` restores a `Heatmap`, rendered at display size
    when an overlay is asked for.
    """
    arrays: dict[str, np.ndarray] = {"format": np.array([2], dtype=np.int64)}
    for label, heat in heatmaps.items():
        g = heat.geometry
        arrays[f"cam:{label}"] = np.asarray(heat.cam, np.float16)
        arrays[f"geometry:{label}"] = np.array(
            [g.rows, g.columns, g.size, g.top, g.left, g.height, g.width], dtype=np.int64
        )
    buffer = io.BytesIO()
    np.savez_compressed(buffer, **arrays)  # type: ignore[arg-type]
    return buffer.getvalue()


def decode_heatmap(data: bytes, label: str) -> Heatmap | np.ndarray:
    """One label's heatmap from `encode_heatmaps` output.

    Returns:
        A `Heatmap`; for files stored by earlier versions (8-bit maps at most 256 px a
        side, no geometry) the float32 map in [0, 1] covering the whole image.

    Raises:
        KeyError: no heatmap for `label`.
    """
    from models.heatmaps import Heatmap
    from models.transforms import Geometry

    with np.load(io.BytesIO(data), allow_pickle=False) as npz:
        if f"cam:{label}" in npz:
            rows, columns, size, top, left, height, width = (
                int(v) for v in npz[f"geometry:{label}"]
            )
            geometry = Geometry(rows, columns, size, top, left, height, width)
            return Heatmap(cam=npz[f"cam:{label}"].astype(np.float16), geometry=geometry)
        if f"map:{label}" in npz:
            old: np.ndarray = npz[f"map:{label}"].astype(np.float32) / 255.0
            return old
    raise KeyError(label)


# The overlay is drawn on a preview at most this many pixels per side (render_overlay's
# default output size), so the full-resolution image never needs to be kept.
PREVIEW_SIDE = 1024


def encode_preview(display: np.ndarray) -> bytes:
    """An 8-bit grey PNG of a display copy (`models.image_pipeline.LoadedImage.display`, uint8,
    at most `PREVIEW_SIDE` a side), or of float32 pixels in [0, 1] (downscaled first)."""
    import cv2

    if display.dtype == np.uint8 and max(display.shape) <= PREVIEW_SIDE:
        grey = display  # an upload's display copy: no call into models/ on the request's walk
    else:
        from models.transforms import fit_long_side

        small = fit_long_side(np.asarray(display, np.float32), PREVIEW_SIDE)
        grey = (np.clip(small, 0.0, 1.0) * 255.0 + 0.5).astype(np.uint8)
    # OpenCV's default settings: with the pinned OpenCV 5.0 they encode the previews of the
    # three real DICOMs, a generated one and six NIH images in 16.2 ms each against 27.2
    # for level 1 with run-length matching (the earlier choice), and write 431 KiB against
    # 383. The preview is encoded on every request.
    ok, png = cv2.imencode(".png", grey)
    if not ok:
        raise RuntimeError("PNG encoding failed")
    return bytes(png.tobytes())


def decode_preview(data: bytes) -> np.ndarray:
    """The preview from `encode_preview` as uint8 (rows, cols)."""
    import cv2

    grey = cv2.imdecode(np.frombuffer(data, np.uint8), cv2.IMREAD_GRAYSCALE)
    if grey is None:
        raise ValueError("stored preview is not a PNG")
    return np.asarray(grey, np.uint8)
