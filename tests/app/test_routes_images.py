"""POST /v1/images/predict, GET /v1/predictions/{id} and heatmaps, through HTTP."""

from __future__ import annotations

from collections.abc import Callable

from fastapi.testclient import TestClient
from service_fixtures import PATIENT_ID, PATIENT_NAME, dx_bytes, sr_dataset, to_bytes
from sqlalchemy import create_engine, text

STUDY = "1.2.826.0.1.3680043.8.498.7"


def test_predict_dicom_body_echoes_uids_and_says_demo(client: TestClient) -> None:
    response = client.post(
        "/v1/images/predict",
        content=dx_bytes(study_uid=STUDY),
        headers={"Content-Type": "application/dicom"},
    )
    assert response.status_code == 200, response.text
    body = response.json()
    assert body["image"]["study_instance_uid"] == STUDY
    assert body["image"]["sop_instance_uid"]
    assert (body["image"]["rows"], body["image"]["columns"]) == (64, 64)
    assert len(body["probabilities"]) == 14
    assert all(0.0 <= p <= 1.0 for p in body["probabilities"].values())
    assert set(body["positive"]) == set(body["probabilities"])  # thresholds are 0 in tests
    assert body["demo"] is True and "DEMO" in body["notice"]
    assert body["model"]["demo"] is True and body["model"]["labels"]
    assert response.headers["x-cxr-demo-model"] == "true"
    assert body["timings"]["total"] > 0
    for box in body["boxes"]:
        assert 0 <= box["x"] <= 64 and 0 <= box["y"] <= 64 and box["width"] > 0


def test_predict_multipart_then_get_prediction_and_heatmap(client: TestClient) -> None:
    response = client.post(
        "/v1/images/predict", files={"file": ("chest.dcm", dx_bytes(), "application/dicom")}
    )
    assert response.status_code == 200, response.text
    body = response.json()
    again = client.get(f"/v1/predictions/{body['id']}")
    assert again.status_code == 200
    assert again.json()["probabilities"] == body["probabilities"]
    assert again.json()["image"] == body["image"]
    label, url = next(iter(body["heatmaps"].items()))
    png = client.get(url)
    assert png.status_code == 200
    assert png.headers["content-type"] == "image/png"
    assert png.content[:8] == b"\x89PNG\r\n\x1a\n"
    small = client.get(url, params={"max_size": 64})
    assert small.status_code == 200 and max(_png_size(small.content)) == 64
    assert client.get(url, params={"max_size": 10}).status_code == 422
    assert client.get(url, params={"max_size": 100_000}).status_code == 422
    missing = client.get(f"/v1/predictions/{body['id']}/heatmaps/Nonsense.png")
    assert missing.status_code == 404
    assert missing.json()["error"] == "NotFound"
    assert client.get("/v1/predictions/no-such-id").status_code == 404


def test_predict_never_stores_patient_name_or_id(
    client: TestClient, make_settings: Callable[..., object]
) -> None:
    response = client.post(
        "/v1/images/predict",
        content=dx_bytes(),
        headers={"Content-Type": "application/dicom"},
    )
    assert response.status_code == 200
    assert PATIENT_NAME not in response.text and PATIENT_ID not in response.text
    url = client.app.state.cxr.settings.resolved_database_url  # type: ignore[attr-defined]
    engine = create_engine(url)
    with engine.connect() as conn:
        dump = " ".join(
            str(row)
            for table in ("studies", "images", "predictions")
            for row in conn.execute(text(f"SELECT * FROM {table}"))  # noqa: S608 - fixed names
        )
    engine.dispose()
    assert PATIENT_NAME not in dump and PATIENT_ID not in dump
    assert "Doe" not in dump


def test_predict_without_model_is_503_saying_how_to_train(
    make_client: Callable[..., TestClient],
) -> None:
    client = make_client(model=False)
    response = client.post(
        "/v1/images/predict", content=dx_bytes(), headers={"Content-Type": "application/dicom"}
    )
    assert response.status_code == 503
    body = response.json()
    assert body["error"] == "ModelNotLoaded"
    assert "cxr train" in body["detail"] and "CXR_MODEL" in body["detail"]
    assert "x-cxr-demo-model" not in response.headers


def test_predict_upload_over_limit_is_413(make_client: Callable[..., TestClient]) -> None:
    client = make_client(max_upload_mb=0.001)  # about 1 KB
    response = client.post(
        "/v1/images/predict", content=dx_bytes(), headers={"Content-Type": "application/dicom"}
    )
    assert response.status_code == 413
    assert response.json()["error"] == "PayloadTooLarge"


def test_predict_chunked_upload_over_limit_is_413(make_client: Callable[..., TestClient]) -> None:
    client = make_client(max_upload_mb=0.001)
    data = dx_bytes()

    def chunks():  # no Content-Length: the limit is enforced while reading
        for i in range(0, len(data), 512):
            yield data[i : i + 512]

    response = client.post(
        "/v1/images/predict", content=chunks(), headers={"Content-Type": "application/dicom"}
    )
    assert response.status_code == 413


def test_predict_not_an_image_is_415(client: TestClient) -> None:
    response = client.post(
        "/v1/images/predict",
        files={"file": ("notes.txt", b"this is not an image at all" * 10, "text/plain")},
    )
    assert response.status_code == 415
    assert response.json()["error"] == "UnsupportedImageError"


def test_predict_corrupt_dicom_is_422(client: TestClient) -> None:
    response = client.post(
        "/v1/images/predict",
        content=dx_bytes()[:-1000],  # pixel data cut short
        headers={"Content-Type": "application/dicom"},
    )
    assert response.status_code == 422
    assert response.json()["error"] == "InvalidDicomError"


def test_predict_structured_report_is_422_missing_pixels(client: TestClient) -> None:
    sr = to_bytes(sr_dataset("No acute disease.", study_uid=STUDY, accession="A"))
    response = client.post(
        "/v1/images/predict", content=sr, headers={"Content-Type": "application/dicom"}
    )
    assert response.status_code in (415, 422)
    assert response.json()["error"] in ("MissingPixelData", "UnsupportedImageError")


def test_predict_wrong_content_type_is_415(client: TestClient) -> None:
    response = client.post(
        "/v1/images/predict", content=b"{}", headers={"Content-Type": "application/json"}
    )
    assert response.status_code == 415
    assert response.json()["error"] == "UnsupportedMediaType"


def test_predict_multipart_without_file_field_is_422(client: TestClient) -> None:
    response = client.post("/v1/images/predict", files={"image": ("x.dcm", dx_bytes())})
    assert response.status_code == 422
    assert "file" in response.json()["detail"]


def test_predict_png_upload_has_no_uids(client: TestClient) -> None:
    import cv2
    import numpy as np

    ok, png = cv2.imencode(".png", (np.arange(64 * 64) % 256).reshape(64, 64).astype(np.uint8))
    assert ok
    response = client.post(
        "/v1/images/predict", files={"file": ("chest.png", png.tobytes(), "image/png")}
    )
    assert response.status_code == 200, response.text
    image = response.json()["image"]
    assert image["study_instance_uid"] is None and image["sop_instance_uid"] is None
    assert (image["rows"], image["columns"]) == (64, 64)


def test_unexpected_error_is_json_500(make_client: Callable[..., TestClient]) -> None:
    client = make_client(raise_errors=False)
    client.app.state.cxr.storage = None  # type: ignore[attr-defined]  # break the service
    response = client.post(
        "/v1/images/predict", content=dx_bytes(), headers={"Content-Type": "application/dicom"}
    )
    assert response.status_code == 500
    assert response.json() == {
        "detail": "internal error; see the service log",
        "error": "InternalServerError",
    }


def _png_size(data: bytes) -> tuple[int, int]:
    import io

    from PIL import Image

    with Image.open(io.BytesIO(data)) as im:
        return im.size


def test_predict_non_square_image_boxes_and_overlay_keep_its_aspect(client: TestClient) -> None:
    import cv2
    import numpy as np

    grey = np.zeros((300, 120), np.uint8)
    grey[40:120, 20:80] = 255
    ok, png = cv2.imencode(".png", grey)
    assert ok
    response = client.post("/v1/images/predict", content=png.tobytes(),
                           headers={"Content-Type": "image/png"})  # fmt: skip
    assert response.status_code == 200, response.text
    body = response.json()
    for box in body["boxes"]:
        assert box["x"] >= 0 and box["x"] + box["width"] <= 120 + 1e-6
        assert box["y"] >= 0 and box["y"] + box["height"] <= 300 + 1e-6
    for url in body["heatmaps"].values():
        width, height = _png_size(client.get(url).content)
        assert (width, height) == (120, 300)  # the image's own size and aspect, not a square


def test_same_new_study_uploaded_at_once_is_stored_once(client: TestClient) -> None:
    # Two requests for one new study race to create it; the loser reads the winner's row.
    import threading

    body = dx_bytes()
    statuses: list[int] = []

    def post() -> None:
        response = client.post(
            "/v1/images/predict", content=body, headers={"Content-Type": "application/dicom"}
        )
        statuses.append(response.status_code)

    threads = [threading.Thread(target=post) for _ in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert statuses == [200] * 4


def test_preview_and_prediction_run_together_and_the_first_error_wins() -> None:
    """The route encodes the preview PNG while the model runs (`_both`): both results come
    back; when either fails the request fails with it, the model's error first."""
    import asyncio

    import pytest

    from app.routes.images import _both

    order: list[str] = []

    async def slow(name: str, delay: float, fail: bool = False) -> str:
        order.append(f"start {name}")
        await asyncio.sleep(delay)
        if fail:
            raise ValueError(name)
        return name

    assert asyncio.run(_both(slow("model", 0.05), slow("preview", 0.01))) == ("model", "preview")
    assert order[:2] == ["start model", "start preview"]  # the second did not wait for the first
    with pytest.raises(ValueError, match="preview"):
        asyncio.run(_both(slow("model", 0.0), slow("preview", 0.0, fail=True)))
    with pytest.raises(ValueError, match="model"):
        asyncio.run(_both(slow("model", 0.02, fail=True), slow("preview", 0.0, fail=True)))
