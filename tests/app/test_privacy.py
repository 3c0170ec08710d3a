"""What the service keeps of reports and patients: labels and hashes, never names or text
(issue 7 item 7), across the API's report and batch paths."""

from __future__ import annotations

import io
import logging
import zipfile
from collections.abc import Callable

import pytest
from fastapi.testclient import TestClient
from service_fixtures import PATIENT_NAME, dx_bytes, sr_dataset, to_bytes, wait_for_job
from sqlalchemy import create_engine, inspect, text

PLANTED = "Quenfordby Xaltrimmer"
STUDY = "1.2.826.0.1.3680043.8.498.771"


def _storage_and_database(client: TestClient) -> str:
    """Every database row and every stored file, as one text to search."""
    settings = client.app.state.cxr.settings  # type: ignore[attr-defined]
    engine = create_engine(settings.resolved_database_url)
    try:
        with engine.connect() as conn:
            rows = [
                " | ".join(str(value) for value in row)
                for table in inspect(engine).get_table_names()
                for row in conn.execute(text(f'SELECT * FROM "{table}"')).all()
            ]
    finally:
        engine.dispose()
    files = [
        path.read_bytes().decode("latin-1")
        for path in settings.storage_dir.rglob("*")
        if path.is_file() and path.suffix not in (".db", ".db-wal", ".db-shm")
    ]
    return "\n".join(rows + files)


@pytest.mark.issue(7)
def test_batch_upload_keeps_no_report_text_or_names(
    make_client: Callable[..., TestClient], caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.DEBUG)
    client = make_client()
    report = f"FINDINGS: {PLANTED} has a small left pleural effusion.\nIMPRESSION: Effusion."
    buffer = io.BytesIO()
    with zipfile.ZipFile(buffer, "w") as zf:
        zf.writestr("s/IM1.dcm", dx_bytes(study_uid=STUDY))
        zf.writestr("s/SR1.dcm", to_bytes(sr_dataset(report, study_uid=STUDY, accession="A77")))
    csv = f"AccessionNumber,Report\nA78,{PLANTED}: cardiomegaly.\n".encode()
    response = client.post(
        "/v1/batches",
        files={
            "file": ("export.zip", buffer.getvalue(), "application/zip"),
            "reports": ("reports.csv", csv, "text/csv"),
        },
    )
    assert response.status_code == 202, response.text
    job = wait_for_job(client, response.json()["id"])
    assert job["state"] == "done"
    results = client.get(f"/v1/batches/{job['id']}/results").text
    assert '"Effusion":"positive"' in results.replace(" ", "")  # the SR was labeled
    everything = _storage_and_database(client) + results + caplog.text
    for secret in (PLANTED, "Quenfordby", "pleural effusion", str(PATIENT_NAME)):
        assert secret not in everything, secret


@pytest.mark.issue(7)
def test_report_api_keeps_no_text_in_database_storage_or_logs(
    make_client: Callable[..., TestClient], caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.DEBUG)
    client = make_client(model=False)
    report = f"FINDINGS: {PLANTED} has a small left pleural effusion."
    assert client.post("/v1/reports/label", json={"text": report}).status_code == 200
    batch = {"reports": [{"id": "x", "text": report}, {"id": "y", "text": " "}]}
    assert client.post("/v1/reports/label", json=batch).status_code == 200
    bad = client.post("/v1/reports/label", json={"text": report + "x" * 200_000})
    assert bad.status_code == 422 and PLANTED not in bad.text
    everything = _storage_and_database(client) + caplog.text
    assert PLANTED not in everything and "pleural effusion" not in everything
