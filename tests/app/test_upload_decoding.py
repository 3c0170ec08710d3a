"""Uploads decoded in worker processes (models/upload_decoding.py): an upload that crashes or
hangs its decoder fails that request and the service goes on; the answers are those of
decoding in the service's own threads."""

from __future__ import annotations

import io
from collections.abc import Callable
from typing import Any

import numpy as np
import pytest
import torch
from fastapi.testclient import TestClient
from PIL import Image
from service_fixtures import chest_pixels, dx_bytes
from troubled_decoder import troubled_upload_load

from models.upload_decoding import UploadDecoders

pytestmark = pytest.mark.issue(19)

_CPU = torch.device("cpu")


def _post(client: TestClient, name: str, data: bytes, kind: str = "application/dicom") -> Any:
    return client.post("/v1/images/predict", files={"file": (name, data, kind)})


def _send(client: TestClient, route: str, name: str, data: bytes) -> Any:
    """An upload through one of the image routes, as a multipart field `file`."""
    files = {"file": (name, data, "application/dicom")}
    if route == "predict":
        return client.post("/v1/images/predict", files=files)
    return client.post("/v1/studies/ask", data={"question": "Is there an effusion?"}, files=files)


@pytest.mark.issue(39)  # the study-question route decoded in the service's own threads
@pytest.mark.parametrize("route", ["predict", "ask"])
def test_an_upload_that_crashes_or_hangs_its_decoder_fails_alone(
    make_client: Callable[..., TestClient], route: str
) -> None:
    client = make_client()
    inference = client.app.state.cxr.inference  # type: ignore[attr-defined]
    inference.decoders.close()
    inference.decoders = UploadDecoders(2, timeout_s=1.0, fn=troubled_upload_load)
    data = dx_bytes(pixels=chest_pixels(96, 80))

    crashed = _send(client, route, "crash.dcm", data)
    assert crashed.status_code == 422, crashed.text
    assert crashed.json()["error"] == "DecoderFailedError"
    assert "crash.dcm: its decoding worker crashed" in crashed.json()["detail"]
    assert _send(client, route, "chest.dcm", data).status_code == 200

    hung = _send(client, route, "hang.dcm", data)
    assert hung.status_code == 422, hung.text
    assert hung.json()["error"] == "DecoderFailedError"
    assert "hang.dcm: decoding took longer than 1 s" in hung.json()["detail"]
    for _ in range(2):  # both slots, the hung one's worker replaced: the service goes on
        assert _send(client, route, "chest.dcm", data).status_code == 200
    assert client.get("/healthz").status_code == 200


@pytest.mark.issue(39)
def test_study_questions_get_the_same_answers_decoded_in_a_worker_or_in_the_service(
    make_client: Callable[..., TestClient],
) -> None:
    data = dx_bytes(pixels=chest_pixels(300, 250))
    answers = {}
    for in_workers in (False, True):
        client = make_client(decode_in_workers=in_workers)
        response = client.post(
            "/v1/studies/ask",
            data={"question": ["Is there an effusion?", "Which side is the effusion on?"]},
            files={"file": ("chest.dcm", data, "application/dicom")},
        )
        assert response.status_code == 200, response.text
        answers[in_workers] = response.json()
    assert answers[True] == answers[False]
    assert answers[True]["answers"][0]["evidence"]["image"]  # the image was read


def _png(pixels: np.ndarray) -> bytes:
    buffer = io.BytesIO()
    Image.fromarray(pixels).save(buffer, format="PNG")
    return buffer.getvalue()


@pytest.mark.parametrize("kind", ["dicom", "png"])
def test_decoding_in_a_worker_gives_the_answer_of_decoding_in_the_service(
    make_client: Callable[..., TestClient], kind: str
) -> None:
    if kind == "dicom":
        data, media = dx_bytes(pixels=chest_pixels(300, 250)), "application/dicom"
    else:
        grey = (chest_pixels(300, 250).astype(np.float64) / 4095 * 255).astype(np.uint8)
        data, media = _png(grey), "image/png"
    answers = {}
    for in_workers in (False, True):
        client = make_client(decode_in_workers=in_workers)
        response = _post(client, f"chest.{kind}", data, media)
        assert response.status_code == 200, response.text
        body = response.json()
        overlays = [client.get(url).content for url in body["heatmaps"].values()]
        assert overlays and all(png[:8] == b"\x89PNG\r\n\x1a\n" for png in overlays)
        # The overlays are drawn on the stored preview: the display copy is the same too.
        answers[in_workers] = (body["probabilities"], body["boxes"], overlays)
    assert answers[True] == answers[False]


def test_upload_decoders_need_a_worker() -> None:
    with pytest.raises(ValueError, match="at least one worker"):
        UploadDecoders(0, timeout_s=None)


def test_beside_a_gpu_the_worker_only_decodes_and_the_device_fits(
    tmp_path: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    import tempfile
    from types import SimpleNamespace

    import models.upload_decoding
    from models.image_pipeline import InputSpec, ReadImage, fit_read, load_for_model

    fitted_on: list[Any] = []

    def on_the_device(image: ReadImage, spec: InputSpec, device: Any) -> Any:
        assert isinstance(image, ReadImage)  # decoded in the worker, not fitted there
        fitted_on.append(device)
        return fit_read(image, spec)  # (this machine has no GPU: fitted on the host)

    monkeypatch.setattr(models.upload_decoding, "fit_read", on_the_device)
    spec = InputSpec(64, "letterbox", display_size=48)
    gpu = SimpleNamespace(type="cuda")
    decoders = UploadDecoders(1, timeout_s=30.0)
    try:
        with tempfile.TemporaryFile(dir=tmp_path) as upload:
            upload.write(dx_bytes(pixels=chest_pixels(96, 80)))
            upload.seek(0)
            here = load_for_model(upload, spec, filename="upload")
            loaded = decoders.load(upload, "upload", spec, gpu)  # type: ignore[arg-type]
    finally:
        decoders.close()
    assert fitted_on == [gpu]
    assert np.array_equal(loaded.prepared.pixels, here.prepared.pixels)
    assert loaded.display is not None and here.display is not None
    assert np.array_equal(loaded.display, here.display)


def test_closing_ends_a_decode_in_progress_at_once(tmp_path: Any) -> None:
    import tempfile
    import threading
    import time

    from models.image_pipeline import InputSpec

    decoders = UploadDecoders(1, timeout_s=60.0, fn=troubled_upload_load)
    errors: list[BaseException] = []

    def decode() -> None:
        with tempfile.TemporaryFile(dir=tmp_path) as upload:
            upload.write(dx_bytes(pixels=chest_pixels(96, 80)))
            try:
                decoders.load(upload, "hang.dcm", InputSpec(64, "letterbox"), _CPU)
            except BaseException as exc:  # noqa: BLE001 - what the request would see
                errors.append(exc)

    thread = threading.Thread(target=decode)
    thread.start()
    time.sleep(1.0)  # the worker is in the hanging decode
    t0 = time.perf_counter()
    decoders.close()
    thread.join(10)
    assert not thread.is_alive() and time.perf_counter() - t0 < 5
    assert len(errors) == 1 and "the service is stopping" in str(errors[0])
    with pytest.raises(RuntimeError, match="the service is stopping"):
        decoders.load(io.BytesIO(b""), "later.dcm", InputSpec(64, "letterbox"), _CPU)
