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
import io
import logging
import time
from concurrent.futures import ThreadPoolExecutor
from typing import Any

import numpy as np

from app.metrics import Metrics

__all__ = [
    "InferenceQueue",
    "decode_heatmaps",
    "decode_preview",
    "encode_heatmaps",
    "encode_preview",
    "load_model",
]

log = logging.getLogger(__name__)

# Heatmaps are smooth upsampled CAMs: 256 px on the long side, 8 bits, loses nothing visible.
_HEATMAP_SIDE = 256


def load_model(path: Any, device: str = "auto") -> Any:
    """Load a checkpoint with `models.predict.load_predictor`.

    Raises:
        models.errors.CheckpointError: unreadable or incompatible checkpoint.
    """
    from models.predict import load_predictor

    return load_predictor(path, device=device)


class InferenceQueue:
    """Micro-batching front of a predictor; start() and stop() inside the event loop."""

    def __init__(
        self, predictor: Any, *, max_batch: int, max_wait_s: float, metrics: Metrics | None = None
    ) -> None:
        self.predictor = predictor
        self.max_batch = max_batch
        self.max_wait_s = max_wait_s
        self.metrics = metrics
        self._queue: asyncio.Queue[tuple[np.ndarray, asyncio.Future[Any]]] | None = None
        self._task: asyncio.Task[None] | None = None
        self._executor = ThreadPoolExecutor(max_workers=1, thread_name_prefix="cxr-inference")

    async def start(self) -> None:
        """Start the worker task."""
        self._queue = asyncio.Queue()
        self._task = asyncio.create_task(self._run(), name="cxr-inference-queue")

    async def stop(self) -> None:
        """Stop the worker; pending requests get a RuntimeError."""
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

    async def predict(self, pixels: np.ndarray) -> Any:
        """Predict one image.

        Args:
            pixels: float32 (rows, cols) in [0, 1].

        Returns:
            The predictor's `Prediction` for this image.
        """
        if self._queue is None:
            raise RuntimeError("InferenceQueue.start() was not called")
        future: asyncio.Future[Any] = asyncio.get_running_loop().create_future()
        await self._queue.put((pixels, future))
        return await future

    async def _collect(self) -> list[tuple[np.ndarray, asyncio.Future[Any]]]:
        assert self._queue is not None  # for mypy: start() set it
        loop = asyncio.get_running_loop()
        batch = [await self._queue.get()]
        deadline = loop.time() + self.max_wait_s
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
        loop = asyncio.get_running_loop()
        while True:
            batch = await self._collect()
            if not batch:
                continue
            start = time.perf_counter()
            try:
                results = await loop.run_in_executor(
                    self._executor, self.predictor.predict, [p for p, _ in batch]
                )
            except Exception as exc:  # noqa: BLE001 - delivered to the waiting requests
                if len(batch) == 1:
                    if not batch[0][1].done():
                        batch[0][1].set_exception(exc)
                    continue
                # One bad image must not fail its neighbours: retry one at a time.
                for pixels, fut in batch:
                    try:
                        (single,) = await loop.run_in_executor(
                            self._executor, self.predictor.predict, [pixels]
                        )
                    except Exception as one_exc:  # noqa: BLE001
                        if not fut.done():
                            fut.set_exception(one_exc)
                    else:
                        if not fut.done():
                            fut.set_result(single)
                continue
            if self.metrics is not None:
                self.metrics.inference_seconds.observe(time.perf_counter() - start)
                self.metrics.inference_batch_size.observe(len(batch))
            for (_, fut), result in zip(batch, results, strict=True):
                if not fut.done():
                    fut.set_result(result)


def encode_heatmaps(heatmaps: dict[str, np.ndarray]) -> bytes:
    """Pack heatmaps (float32 (rows, cols) in [0, 1]) into a small compressed .npz.

    They are downsampled to at most 256 px per side and quantized to 8 bits; the
    original shape is kept so `decode_heatmaps` restores full-size maps.
    """
    import cv2

    arrays: dict[str, np.ndarray] = {}
    for label, heat in heatmaps.items():
        heat = np.asarray(heat, dtype=np.float32)
        rows, cols = heat.shape
        scale = min(1.0, _HEATMAP_SIDE / max(rows, cols))
        size = (max(1, round(cols * scale)), max(1, round(rows * scale)))
        small = cv2.resize(heat, size, interpolation=cv2.INTER_AREA) if scale < 1 else heat
        arrays[f"map:{label}"] = np.clip(np.rint(small * 255), 0, 255).astype(np.uint8)
        arrays[f"shape:{label}"] = np.array([rows, cols], dtype=np.int64)
    buffer = io.BytesIO()
    np.savez_compressed(buffer, **arrays)  # type: ignore[arg-type]
    return buffer.getvalue()


def decode_heatmaps(data: bytes, label: str) -> np.ndarray:
    """One heatmap from `encode_heatmaps` output, float32 (rows, cols) in [0, 1].

    Raises:
        KeyError: no heatmap for `label`.
    """
    import cv2

    with np.load(io.BytesIO(data), allow_pickle=False) as npz:
        if f"map:{label}" not in npz:
            raise KeyError(label)
        small = npz[f"map:{label}"].astype(np.float32) / 255.0
        rows, cols = (int(v) for v in npz[f"shape:{label}"])
    if small.shape != (rows, cols):
        small = cv2.resize(small, (cols, rows), interpolation=cv2.INTER_LINEAR)
    return np.ascontiguousarray(small, dtype=np.float32)


# The overlay is drawn on a preview at most this many pixels per side (render_overlay's
# default output size), so the full-resolution image never needs to be kept.
PREVIEW_SIDE = 1024


def encode_preview(pixels: np.ndarray) -> bytes:
    """An 8-bit grey PNG of `pixels` (float32 (rows, cols) in [0, 1]), at most 1024 px a side."""
    import cv2

    rows, cols = pixels.shape
    grey: np.ndarray = np.clip(np.rint(pixels * 255.0), 0, 255).astype(np.uint8)
    scale = min(1.0, PREVIEW_SIDE / max(rows, cols))
    if scale < 1:
        size = (max(1, round(cols * scale)), max(1, round(rows * scale)))
        grey = cv2.resize(grey, size, interpolation=cv2.INTER_AREA)
    ok, png = cv2.imencode(".png", grey, [cv2.IMWRITE_PNG_COMPRESSION, 3])
    if not ok:
        raise RuntimeError("PNG encoding failed")
    return bytes(png.tobytes())


def decode_preview(data: bytes) -> np.ndarray:
    """The preview from `encode_preview` as float32 (rows, cols) in [0, 1]."""
    import cv2

    grey = cv2.imdecode(np.frombuffer(data, np.uint8), cv2.IMREAD_GRAYSCALE)
    if grey is None:
        raise ValueError("stored preview is not a PNG")
    return grey.astype(np.float32) / 255.0
