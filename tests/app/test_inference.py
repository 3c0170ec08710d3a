"""The micro-batching inference queue and heatmap packing."""

from __future__ import annotations

import asyncio
import threading
from typing import Any

import numpy as np

from app.inference import InferenceQueue, decode_heatmaps, encode_heatmaps


class _RecordingPredictor:
    """Stands in for models.predict.Predictor: records batch sizes, fails on NaN input."""

    def __init__(self) -> None:
        self.batches: list[int] = []
        self.threads: set[str] = set()

    def predict(self, images: list[np.ndarray]) -> list[dict[str, Any]]:
        self.batches.append(len(images))
        self.threads.add(threading.current_thread().name)
        if any(np.isnan(im).any() for im in images):
            raise ValueError("NaN in image")
        return [{"mean": float(im.mean())} for im in images]


def test_inference_queue_batches_concurrent_requests_off_the_loop() -> None:
    predictor = _RecordingPredictor()

    async def scenario() -> list[Any]:
        queue = InferenceQueue(predictor, max_batch=4, max_wait_s=0.05)
        await queue.start()
        try:
            images = [np.full((8, 8), i, np.float32) for i in range(6)]
            return await asyncio.gather(*(queue.predict(im) for im in images))
        finally:
            await queue.stop()

    results = asyncio.run(scenario())
    assert [r["mean"] for r in results] == [0, 1, 2, 3, 4, 5]  # each caller gets its own
    assert predictor.batches == [4, 2]
    assert predictor.threads == {"cxr-inference_0"}  # a worker thread, not the event loop


def test_inference_queue_isolates_a_failing_image() -> None:
    predictor = _RecordingPredictor()

    async def scenario() -> list[Any]:
        queue = InferenceQueue(predictor, max_batch=4, max_wait_s=0.05)
        await queue.start()
        try:
            good = np.zeros((8, 8), np.float32)
            bad = np.full((8, 8), np.nan, np.float32)
            return await asyncio.gather(
                queue.predict(good), queue.predict(bad), return_exceptions=True
            )
        finally:
            await queue.stop()

    good, bad = asyncio.run(scenario())
    assert good == {"mean": 0.0}
    assert isinstance(bad, ValueError)


def test_inference_heatmaps_round_trip_at_original_size() -> None:
    y, x = np.mgrid[0:600, 0:500]
    heat = (x / 499.0).astype(np.float32)
    data = encode_heatmaps({"Mass": heat})
    assert len(data) < 50_000
    back = decode_heatmaps(data, "Mass")
    assert back.shape == (600, 500) and back.dtype == np.float32
    assert float(np.abs(back - heat).max()) < 0.02
