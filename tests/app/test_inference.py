"""The micro-batching inference queue and heatmap packing."""

from __future__ import annotations

import asyncio
import threading
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from fastapi.testclient import TestClient
from service_fixtures import dx_bytes

from app.inference import InferenceQueue, decode_heatmap, encode_heatmaps
from app.main import create_app
from app.settings import Settings
from models.heatmaps import Heatmap
from models.transforms import Geometry


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


def test_a_lone_request_goes_at_once_and_one_being_decoded_is_waited_for() -> None:
    predictor = _RecordingPredictor()
    zeros = np.zeros((8, 8), np.float32)

    async def scenario() -> None:
        queue = InferenceQueue(predictor, max_batch=4, max_wait_s=1.0)
        await queue.start()
        try:
            # Nothing else on its way: the first goes alone, though the second comes soon.
            first = asyncio.create_task(queue.predict(zeros))
            await asyncio.sleep(0.2)
            await asyncio.gather(first, queue.predict(zeros))
            # Another request decoding: this one waits for it and they share a batch.
            release = threading.Event()

            def slow_decode() -> np.ndarray:
                release.wait(5)
                return np.ones((8, 8), np.float32)

            async def decoded_then_predicted() -> Any:
                return await queue.predict(await queue.decode(slow_decode))

            late = asyncio.create_task(decoded_then_predicted())
            await asyncio.sleep(0.05)
            waiting = asyncio.create_task(queue.predict(zeros))
            await asyncio.sleep(0.1)
            release.set()
            await asyncio.gather(waiting, late)
        finally:
            await queue.stop()

    asyncio.run(scenario())
    assert predictor.batches == [1, 1, 2]


def test_freed_memory_is_handed_back_once_decoding_has_stopped(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    # Trimming after every large decode made the next one fault its memory in afresh
    # (15 ms a 2500 x 2048 DICOM on the 2-core VM): now once the decodes stop, whichever
    # route decoded (the image and the study-question routes both decode through here).
    import app.inference as inference

    trims: list[float] = []
    monkeypatch.setattr(inference, "release_freed_memory", lambda: trims.append(1.0))

    async def scenario() -> list[int]:
        queue = InferenceQueue(_RecordingPredictor(), max_batch=1, max_wait_s=0.0, trim_idle_s=0.5)
        await queue.start()
        seen = []
        try:
            for _ in range(4):  # back to back: no trim in between
                await queue.decode(time.sleep, 0.05)
            seen.append(len(trims))
            # A decode in progress when the quiet period ends: the trim waits for it.
            release = threading.Event()
            decoding = asyncio.create_task(queue.decode(release.wait, 5.0))
            await asyncio.sleep(0.8)
            seen.append(len(trims))
            release.set()
            await decoding
            await asyncio.sleep(0.8)
            seen.append(len(trims))
            await queue.decode(time.sleep, 0.0)  # stopping cancels a pending trim
        finally:
            await queue.stop()
        await asyncio.sleep(0.7)
        seen.append(len(trims))
        return seen

    assert asyncio.run(scenario()) == [0, 0, 1, 1]


def test_malloc_trim_is_looked_up_once(monkeypatch: pytest.MonkeyPatch) -> None:
    import ctypes.util

    import app.inference as inference

    looked_up: list[str] = []
    real = ctypes.util.find_library

    def find_library(name: str) -> str | None:
        looked_up.append(name)
        return real(name)

    inference._malloc_trim.cache_clear()
    monkeypatch.setattr(ctypes.util, "find_library", find_library)
    for _ in range(3):
        inference.release_freed_memory()
    assert looked_up == ["c"]  # was a subprocess (ldconfig) per large decode


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


def test_inference_heatmaps_stored_at_map_size_whatever_the_image_size() -> None:
    geometry = Geometry.fit(10_000, 8_000, 1024, "letterbox")
    cam = np.random.default_rng(0).random((32, 32)).astype(np.float32)
    data = encode_heatmaps({"Mass": Heatmap.from_cam(cam, geometry)})
    assert len(data) < 5_000  # a 10000 x 8000 image: a few KiB, not 320 MB of float32
    back = decode_heatmap(data, "Mass")
    assert isinstance(back, Heatmap) and back.geometry == geometry
    assert back.cam.shape == (32, 32) and back.cam.dtype == np.float16
    assert float(np.abs(back.cam.astype(np.float32) - cam / cam.max()).max()) < 1e-3
    assert back.render(100, 80).shape == (100, 80)
    with pytest.raises(KeyError):
        decode_heatmap(data, "Nodule")


def test_inference_decodes_heatmaps_stored_by_earlier_versions() -> None:
    import io

    buffer = io.BytesIO()
    old = np.arange(64, dtype=np.uint8).reshape(8, 8)
    np.savez_compressed(buffer, **{"map:Mass": old, "shape:Mass": np.array([80, 80])})
    back = decode_heatmap(buffer.getvalue(), "Mass")
    assert isinstance(back, np.ndarray) and back.shape == (8, 8) and back.max() <= 1.0


@pytest.mark.issue(19)
def test_the_service_loads_its_model_in_the_configured_precision(
    make_settings: Callable[..., Settings], demo_checkpoint: Path, caplog: pytest.LogCaptureFixture
) -> None:
    app = create_app(make_settings(model=demo_checkpoint, device="cpu", precision="bfloat16"))
    with caplog.at_level("INFO", logger="app"), TestClient(app) as client:
        predictor = app.state.cxr.predictor
        assert predictor.precision == "bfloat16"
        assert "on cpu in bfloat16" in caplog.text
        response = client.post("/v1/images/predict", files={"file": ("a.dcm", dx_bytes())})
        assert response.status_code == 200, response.text
        answer = response.json()
        assert set(answer["probabilities"]) == set(predictor.labels)
        assert answer["model"]["inference"] == {"device": "cpu", "precision": "bfloat16"}
        # Read back later, the prediction still says how it was made.
        again = client.get(f"/v1/predictions/{answer['id']}").json()
        assert again["model"]["inference"] == answer["model"]["inference"]
