"""Image uploads wait on disk, not in memory, and decode a bounded number at once
(issue 18 item 13: eight concurrent 100 MB uploads cost +4.1 GB, each held as bytes)."""

from __future__ import annotations

import asyncio
import hashlib
import threading
import time
from collections.abc import Callable
from typing import Any

import pytest
from fastapi.testclient import TestClient
from service_fixtures import chest_pixels, dx_bytes

import models.image_pipeline
from app.inference import InferenceQueue

pytestmark = pytest.mark.issue(18)


@pytest.fixture
def sources(monkeypatch: pytest.MonkeyPatch) -> list[Any]:
    """What the route hands to the image pipeline's decoder, for each request."""
    seen: list[Any] = []
    real = models.image_pipeline.read_stored

    def spy(source: Any, **kwargs: Any) -> Any:
        seen.append(source)
        return real(source, **kwargs)

    monkeypatch.setattr(models.image_pipeline, "read_stored", spy)
    return seen


@pytest.mark.parametrize("rows", [64, 1024])  # a multipart part in memory, then on disk
@pytest.mark.parametrize("multipart", [False, True])
@pytest.mark.parametrize("in_workers", [False, True])
def test_predict_decodes_from_the_spooled_file_and_keeps_its_hash(
    make_client: Callable[..., TestClient],
    sources: list[Any],
    multipart: bool,
    rows: int,
    in_workers: bool,
) -> None:
    # The digest is read on a thread, from its own descriptor, while the image decodes; a
    # decoding worker reads a duplicate of the upload's descriptor (its offset shared).
    client = make_client(store_uploads=True, decode_in_workers=in_workers)
    data = dx_bytes(pixels=chest_pixels(rows, 640))
    if multipart:
        response = client.post(
            "/v1/images/predict", files={"file": ("chest.dcm", data, "application/dicom")}
        )
    else:
        response = client.post(
            "/v1/images/predict", content=data, headers={"Content-Type": "application/dicom"}
        )
    assert response.status_code == 200, response.text
    if in_workers:
        assert not sources  # decoded in the worker process, which the spy does not reach
    else:
        (source,) = sources
        assert not isinstance(source, bytes) and hasattr(source, "read")  # a file, not bytes
    state = client.app.state.cxr  # type: ignore[attr-defined]
    digest = hashlib.sha256(data).hexdigest()
    from sqlalchemy import text

    with state.engine.connect() as conn:
        row = conn.execute(text("SELECT sha256, upload_key FROM images")).one()
    assert row.sha256 == digest
    assert state.storage.get_bytes(row.upload_key) == data  # CXR_STORE_UPLOADS keeps it whole


def test_predict_empty_raw_body_is_422(client: TestClient) -> None:
    response = client.post(
        "/v1/images/predict", content=b"", headers={"Content-Type": "application/dicom"}
    )
    assert response.status_code == 422 and response.json()["error"] == "EmptyUpload"


def test_inference_queue_runs_at_most_max_decodes_at_once() -> None:
    running = 0
    most = 0
    lock = threading.Lock()

    def decode(i: int) -> int:
        nonlocal running, most
        with lock:
            running += 1
            most = max(most, running)
        time.sleep(0.05)
        with lock:
            running -= 1
        return i

    async def scenario() -> list[int]:
        queue = InferenceQueue(object(), max_batch=1, max_wait_s=0.0, max_decodes=2)
        await queue.start()
        try:
            return await asyncio.gather(*(queue.decode(decode, i) for i in range(8)))
        finally:
            await queue.stop()

    assert asyncio.run(scenario()) == list(range(8))
    assert most == 2


def test_predict_truncated_png_or_jpeg_is_422_not_415(client: TestClient) -> None:
    import io

    import numpy as np
    from PIL import Image

    rng = np.random.default_rng(0)
    for fmt, media in (("PNG", "image/png"), ("JPEG", "image/jpeg")):
        buf = io.BytesIO()
        Image.fromarray(rng.integers(0, 255, (256, 256), dtype=np.uint8)).save(buf, fmt)
        half = buf.getvalue()[: len(buf.getvalue()) // 2]
        response = client.post("/v1/images/predict", content=half, headers={"content-type": media})
        assert response.status_code == 422, (fmt, response.text)
        assert response.json()["error"] == "CorruptImageError"
