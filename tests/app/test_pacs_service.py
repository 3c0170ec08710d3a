"""POST /v1/batches with a DICOMweb source: what is refused before any job starts."""

from __future__ import annotations

from typing import Any

import pytest

pytestmark = pytest.mark.issue(10)


def test_batches_dicomweb_needs_a_configured_server(client: Any) -> None:
    response = client.post("/v1/batches", json={"dicomweb": {"since": "2024-01-01"}})
    assert response.status_code == 503
    assert "CXR_DICOMWEB_URL" in response.json()["detail"]


BAD_BODIES = [
    {"dicomweb": {"url": "http://169.254.169.254/latest"}},  # clients cannot pick a server
    {"dicomweb": {"study": ["../../instances"]}},
    {"dicomweb": {"since": "last tuesday"}},
    {"dicomweb": {"modality": ["CR;DROP"]}},
    {"dicomweb": {"push": ["pdf"]}},
    {"dicomweb": {}, "path": "exports/x"},
    {},
]


def test_batches_dicomweb_refuses_bad_requests(make_client: Any) -> None:
    client = make_client(dicomweb_url="http://127.0.0.1:9/dicom-web")
    for body in BAD_BODIES:  # one app for all: each case is a request, not a start-up
        response = client.post("/v1/batches", json=body)
        assert response.status_code == 422, (body, response.text)
    assert client.get("/v1/batches").json() == []  # no job was created


def test_batches_dicomweb_push_needs_a_model(make_client: Any) -> None:
    client = make_client(model=False, dicomweb_url="http://127.0.0.1:9/dicom-web")
    response = client.post("/v1/batches", json={"dicomweb": {"push": ["sr"]}})
    assert response.status_code == 503 and "push" in response.json()["detail"]


def test_batches_dicomweb_unreachable_server_fails_the_job_clearly(make_client: Any) -> None:
    from service_fixtures import wait_for_job

    client = make_client(dicomweb_url="http://127.0.0.1:9/dicom-web", dicomweb_password="pw")
    response = client.post("/v1/batches", json={"dicomweb": {"modality": ["CR"]}})
    assert response.status_code == 202, response.text
    job = wait_for_job(client, response.json()["id"])
    assert job["state"] == "failed"
    assert "GET http://127.0.0.1:9/dicom-web/studies" in job["error"]
