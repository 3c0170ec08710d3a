"""Uploads decoded in worker processes (models/upload_decoding.py) behind every image route
(POST /v1/images/predict, POST /v1/studies/ask): an upload that crashes or hangs its decoder
fails that request and the service goes on; the answers are those of decoding in the
service's own threads."""

from __future__ import annotations

import io
from collections.abc import Callable
from typing import Any

import numpy as np
import pytest
from fastapi.testclient import TestClient
from PIL import Image
from service_fixtures import chest_pixels, dx_bytes
from troubled_decoder import troubled_upload_load

from models.upload_decoding import UploadDecoders

pytestmark = pytest.mark.issue(19)


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
