"""/healthz, /readyz, /metrics, API keys and the OpenAPI schema."""

from __future__ import annotations

from collections.abc import Callable

from fastapi.testclient import TestClient
from service_fixtures import dx_bytes

from app.security import hash_api_key


def test_healthz_and_readyz_with_model(client: TestClient) -> None:
    assert client.get("/healthz").json() == {"status": "ok"}
    ready = client.get("/readyz")
    assert ready.status_code == 200
    body = ready.json()
    assert body["ready"] and body["database"] and body["labeler"]
    assert body["model"] == "loaded" and body["demo"] is True


def test_readyz_without_model_is_ready_with_model_absent(
    make_client: Callable[..., TestClient],
) -> None:
    body = make_client(model=False).get("/readyz").json()
    assert body["ready"] is True and body["model"] == "absent"


def test_metrics_counts_requests_and_predictions(client: TestClient) -> None:
    client.post(
        "/v1/images/predict", content=dx_bytes(), headers={"Content-Type": "application/dicom"}
    )
    client.get("/v1/predictions/unknown")
    text = client.get("/metrics").text
    assert 'cxr_predictions_total{source="api"} 1.0' in text
    assert 'route="/v1/predictions/{prediction_id}"' in text  # templates, not raw paths
    assert "/v1/predictions/unknown" not in text
    assert "cxr_http_request_duration_seconds_bucket" in text
    assert 'cxr_batch_jobs{state="done"}' in text
    assert "cxr_model_loaded 1.0" in text


def test_api_keys_401_403_and_ok(make_client: Callable[..., TestClient]) -> None:
    client = make_client(model=False, api_keys=["s3cret-long-enough", hash_api_key("other-key")])
    payload = {"text": "No acute disease."}
    missing = client.post("/v1/reports/label", json=payload)
    assert missing.status_code == 401 and missing.json()["error"] == "Unauthorized"
    wrong = client.post("/v1/reports/label", json=payload, headers={"X-API-Key": "nope"})
    assert wrong.status_code == 403 and wrong.json()["error"] == "Forbidden"
    for key in ("s3cret-long-enough", "other-key"):
        ok = client.post("/v1/reports/label", json=payload, headers={"X-API-Key": key})
        assert ok.status_code == 200
    assert client.get("/healthz").status_code == 200  # probes need no key
    assert client.get("/v1/batches/x").status_code == 401


def test_openapi_documents_endpoints_with_examples(client: TestClient) -> None:
    schema = client.get("/openapi.json").json()
    paths = schema["paths"]
    for path in (
        "/v1/reports/label",
        "/v1/images/predict",
        "/v1/predictions/{prediction_id}",
        "/v1/predictions/{prediction_id}/heatmaps/{label}.png",
        "/v1/batches",
        "/v1/batches/{job_id}",
        "/v1/batches/{job_id}/results",
    ):
        assert path in paths, path
    body = paths["/v1/images/predict"]["post"]["requestBody"]["content"]
    assert "application/dicom" in body and "multipart/form-data" in body
    assert schema["components"]["schemas"]["PredictionRead"]["examples"]
