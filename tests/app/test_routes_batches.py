"""Batch jobs through HTTP: server folder, zip upload, results, refusals, restart-resume."""

from __future__ import annotations

import csv
import io
import json
import warnings
import zipfile
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from dicom_factory import CR_STORAGE, GSPS_STORAGE, build_dataset, dx_bytes, to_bytes
from fastapi.testclient import TestClient
from service_fixtures import (
    EXPECTED_EXPORT,
    STUDY_A,
    build_export,
    wait_for_job,
    write_reports_csv,
)
from sqlalchemy import func, select

from app.db.models import BatchItem
from app.jobs import BatchRunner


@pytest.fixture
def export_root(tmp_path: Path) -> Path:
    root = tmp_path / "roots"
    build_export(root / "export1")
    write_reports_csv(root / "reports.csv")
    return root


def _results(client: TestClient, job_id: str) -> list[dict[str, Any]]:
    response = client.get(f"/v1/batches/{job_id}/results")
    assert response.status_code == 200
    assert response.headers["content-type"].startswith("application/x-ndjson")
    return [json.loads(line) for line in response.text.splitlines()]


def _check_every_file_once(lines: list[dict[str, Any]]) -> dict[str, dict[str, Any]]:
    paths = [line["path"] for line in lines]
    assert len(paths) == len(set(paths)), "a file was reported twice"
    assert sorted(paths) == sorted(EXPECTED_EXPORT)
    by_path = {line["path"]: line for line in lines}
    for path, (kind, state) in EXPECTED_EXPORT.items():
        assert (by_path[path]["kind"], by_path[path]["state"]) == (kind, state), path
    return by_path


def test_batch_server_path_end_to_end(
    make_client: Callable[..., TestClient], export_root: Path
) -> None:
    client = make_client(batch_roots=[export_root], batch_chunk_size=2)
    response = client.post("/v1/batches", json={"path": "export1", "reports": "reports.csv"})
    assert response.status_code == 202, response.text
    job_id = response.json()["id"]
    assert response.headers["location"] == f"/v1/batches/{job_id}"
    status = wait_for_job(client, job_id)
    assert status["state"] == "done", status
    assert status["total"] == len(EXPECTED_EXPORT)
    assert (status["done"], status["skipped"], status["failed"], status["pending"]) == (4, 4, 2, 0)
    assert status["progress"] == 1.0 and status["demo"] is True

    by_path = _check_every_file_once(_results(client, job_id))
    sr_image = by_path["PAT1/STUDY1/SER1/IM000001"]
    assert sr_image["study_instance_uid"] == STUDY_A
    assert sr_image["report"]["source"] == "sr"
    assert "Cardiomegaly" in sr_image["report"]["positive"]
    assert len(sr_image["prediction"]["probabilities"]) == 14
    csv_image = by_path["PAT2/STUDY2/image.dcm"]
    assert csv_image["report"]["source"] == "csv"
    assert csv_image["report"]["positive"] == ["Effusion"]
    assert csv_image["report"]["labels"]["Pneumothorax"] == "negative"
    assert "truncated" in by_path["PAT2/STUDY2/broken.dcm"]["error"]
    assert "CT" in by_path["PAT3/ct_slice.dcm"]["reason"]

    listed = client.get("/v1/batches").json()
    assert [job["id"] for job in listed] == [job_id]

    table = client.get(f"/v1/batches/{job_id}/results", params={"format": "csv"})
    assert table.status_code == 200 and table.headers["content-type"].startswith("text/csv")
    rows = list(csv.DictReader(io.StringIO(table.text)))
    assert len(rows) == len(EXPECTED_EXPORT)
    row = next(r for r in rows if r["path"] == "PAT2/STUDY2/image.dcm")
    assert row["report_Effusion"] == "positive" and float(row["prob_Effusion"]) >= 0

    assert client.delete(f"/v1/batches/{job_id}").status_code == 204
    assert client.get(f"/v1/batches/{job_id}").status_code == 404
    assert client.get("/v1/batches").json() == []


def test_batch_without_model_labels_reports_and_reads_images(
    make_client: Callable[..., TestClient], export_root: Path
) -> None:
    client = make_client(model=False, batch_roots=[export_root])
    job_id = client.post("/v1/batches", json={"path": str(export_root / "export1")}).json()["id"]
    assert wait_for_job(client, job_id)["state"] == "done"
    by_path = _check_every_file_once(_results(client, job_id))
    image = by_path["PAT1/STUDY1/SER1/IM000002.dcm"]
    assert image["prediction"] is None and "no model" in image["note"]
    assert image["report"]["source"] == "sr"
    assert by_path["PAT2/STUDY2/image.dcm"]["report"] is None  # no CSV given


def test_batch_zip_upload_end_to_end(
    make_client: Callable[..., TestClient], tmp_path: Path
) -> None:
    export = build_export(tmp_path / "export")
    buffer = io.BytesIO()
    with zipfile.ZipFile(buffer, "w", zipfile.ZIP_DEFLATED) as zf:
        for path in sorted(export.rglob("*")):
            if path.is_file():
                zf.write(path, path.relative_to(export).as_posix())
    reports = write_reports_csv(tmp_path / "reports.csv").read_bytes()
    client = make_client()
    response = client.post(
        "/v1/batches",
        files={
            "file": ("export.zip", buffer.getvalue(), "application/zip"),
            "reports": ("reports.csv", reports, "text/csv"),
        },
    )
    assert response.status_code == 202, response.text
    job_id = response.json()["id"]
    assert wait_for_job(client, job_id)["state"] == "done"
    by_path = _check_every_file_once(_results(client, job_id))
    assert by_path["PAT2/STUDY2/image.dcm"]["report"]["source"] == "csv"
    storage = client.app.state.cxr.storage  # type: ignore[attr-defined]
    assert not storage.job_dir(job_id).exists(), "extracted files must be removed when done"


@pytest.mark.parametrize(
    ("name", "why"),
    [("../evil.dcm", "'..'"), ("/etc/cron.d/evil", "absolute"), ("a/../../evil", "'..'")],
)
def test_batch_zip_with_path_traversal_is_refused(
    make_client: Callable[..., TestClient], name: str, why: str
) -> None:
    buffer = io.BytesIO()
    with zipfile.ZipFile(buffer, "w") as zf:
        zf.writestr("ok/IM1", b"x")
        zf.writestr(name, b"x")
    client = make_client()
    response = client.post("/v1/batches", files={"file": ("x.zip", buffer.getvalue())})
    assert response.status_code == 422
    body = response.json()
    assert body["error"] == "UnsafeArchiveError" and why in body["detail"]


def test_batch_zip_bomb_is_refused(make_client: Callable[..., TestClient]) -> None:
    buffer = io.BytesIO()
    with zipfile.ZipFile(buffer, "w", zipfile.ZIP_DEFLATED) as zf:
        zf.writestr("bomb.dcm", b"\0" * (20 * 2**20))  # 20 MiB of zeros: ~1000:1
    client = make_client()
    response = client.post("/v1/batches", files={"file": ("bomb.zip", buffer.getvalue())})
    assert response.status_code == 422
    assert "zip bomb" in response.json()["detail"]


def test_batch_path_outside_roots_is_refused(
    make_client: Callable[..., TestClient], export_root: Path, tmp_path: Path
) -> None:
    outside = tmp_path / "elsewhere"
    outside.mkdir()
    (export_root / "link").symlink_to(outside)
    client = make_client(batch_roots=[export_root])
    # Outside the roots: 403 whether the path exists or not (nothing is revealed).
    for path in ("../elsewhere", str(outside), "link", "/etc", "/no/such/dir", "../nope"):
        response = client.post("/v1/batches", json={"path": path})
        assert response.status_code == 403, path
        assert response.json()["error"] == "BatchSourceError"
        assert "outside the configured batch roots" in response.json()["detail"]
    # Inside the roots but missing: 404 (issue 7 item 9).
    for path in ("nope", str(export_root / "nope"), "export1/../nope"):
        missing = client.post("/v1/batches", json={"path": path})
        assert missing.status_code == 404, path
        assert missing.json()["error"] == "BatchSourceNotFound"
        assert "no such folder" in missing.json()["detail"]
    csv = client.post("/v1/batches", json={"path": "export1", "reports": "missing.csv"})
    assert csv.status_code == 404 and "no such file" in csv.json()["detail"]


def test_batch_server_paths_disabled_without_roots(client: TestClient) -> None:
    response = client.post("/v1/batches", json={"path": "anything"})
    assert response.status_code == 403
    assert "CXR_BATCH_ROOTS" in response.json()["detail"]


def test_batch_unknown_job_is_404(client: TestClient) -> None:
    assert client.get("/v1/batches/00000000-0000-0000-0000-000000000000").status_code == 404
    assert client.get("/v1/batches/nope/results").status_code == 404


class _Crash(BaseException):
    """Simulates the process dying (not an Exception, so nothing catches it)."""


def test_batch_job_resumes_after_restart_without_duplicates(
    make_client: Callable[..., TestClient], export_root: Path
) -> None:
    # First life: the job is created, processes 3 chunks of 1 file, then the process "dies".
    first = make_client(batch_roots=[export_root], run_batch_jobs=False)
    job_id = first.post("/v1/batches", json={"path": "export1", "reports": "reports.csv"}).json()[
        "id"
    ]
    state = first.app.state.cxr  # type: ignore[attr-defined]
    runner = BatchRunner(
        sessions=state.sessions,
        labeler=state.labeler,
        predictor=state.predictor,
        storage_root=state.storage.root,
        zip_limits=state.zip_limits,
        chunk_size=1,
    )

    def crash_after(chunks: int) -> None:
        if chunks == 3:
            raise _Crash

    with pytest.raises(_Crash):
        runner.run_job(job_id, after_chunk=crash_after)
    interrupted = first.get(f"/v1/batches/{job_id}").json()
    assert interrupted["state"] == "running"
    assert interrupted["pending"] == len(EXPECTED_EXPORT) - 3
    first.__exit__(None, None, None)

    # Second life: start-up resumes the job, which finishes with every file exactly once.
    second = make_client(batch_roots=[export_root])
    status = wait_for_job(second, job_id)
    assert status["state"] == "done"
    assert status["total"] == len(EXPECTED_EXPORT)
    assert status["done"] + status["skipped"] + status["failed"] == len(EXPECTED_EXPORT)
    by_path = _check_every_file_once(_results(second, job_id))
    # The SR was processed in the first life; images processed after the restart still get it.
    assert by_path["PAT1/STUDY1/SER1/IM000002.dcm"]["report"]["source"] == "sr"
    with second.app.state.cxr.sessions() as session:  # type: ignore[attr-defined]
        rows = session.scalar(
            select(func.count()).select_from(BatchItem).where(BatchItem.job_id == job_id)
        )
    assert rows == len(EXPECTED_EXPORT)


def test_batch_job_survives_graceful_shutdown(
    make_client: Callable[..., TestClient], export_root: Path
) -> None:
    first = make_client(batch_roots=[export_root], batch_chunk_size=1)
    job_id = first.post("/v1/batches", json={"path": "export1"}).json()["id"]
    first.__exit__(None, None, None)  # shutdown mid-job: the runner stops after its chunk
    second = make_client(batch_roots=[export_root], batch_chunk_size=1)
    status = wait_for_job(second, job_id)
    assert status["state"] == "done" and status["pending"] == 0
    _check_every_file_once(_results(second, job_id))


# --- a truncated image fails; the results CSV runs no formula; the request is strict ------


def _zip_of(members: dict[str, bytes]) -> bytes:
    buffer = io.BytesIO()
    with zipfile.ZipFile(buffer, "w") as zf:
        for name, data in members.items():
            zf.writestr(name, data)
    return buffer.getvalue()


def _finished_zip_job(client: TestClient, members: dict[str, bytes]) -> tuple[str, dict[str, Any]]:
    response = client.post("/v1/batches", files={"file": ("x.zip", _zip_of(members))})
    assert response.status_code == 202, response.text
    job_id = response.json()["id"]
    status = wait_for_job(client, job_id)
    assert status["state"] == "done", status
    return job_id, status


def test_batch_image_cut_before_its_pixel_data_is_failed_not_skipped(
    make_client: Callable[..., TestClient],
) -> None:
    cr = dx_bytes(modality="CR", sop_class=CR_STORAGE)
    gsps = to_bytes(build_dataset(modality="PR", sop_class=GSPS_STORAGE))
    client = make_client()
    # The same bytes to POST /v1/images/predict are a 422 (truncated).
    truncated = cr[: cr.find(b"\xe0\x7f\x10\x00")]
    predicted = client.post("/v1/images/predict", files={"file": ("cut.dcm", truncated)})
    assert predicted.status_code == 422, predicted.text
    job_id, status = _finished_zip_job(
        client, {"cut.dcm": truncated, "short.dcm": cr[:600], "ps.dcm": gsps, "ok.dcm": cr}
    )
    assert (status["done"], status["skipped"], status["failed"]) == (1, 1, 2)
    by_path = {line["path"]: line for line in _results(client, job_id)}
    for key in ("cut.dcm", "short.dcm"):
        assert by_path[key]["state"] == "failed", by_path[key]
        assert by_path[key]["error"].startswith("truncated: no pixel data"), by_path[key]
    assert by_path["ps.dcm"]["state"] == "skipped"
    assert by_path["ps.dcm"]["reason"] == f"no pixel data (SOP Class {GSPS_STORAGE})"


def test_batch_results_csv_neutralises_formulas_and_keeps_numbers(
    make_client: Callable[..., TestClient],
) -> None:
    link = '=HYPERLINK("http://evil.example/?x","open")'
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", UserWarning)  # longer than SH's 16 characters
        hostile = dx_bytes(accession=link)
    client = make_client()
    job_id, _ = _finished_zip_job(
        client, {"=1+2.dcm": dx_bytes(), "-3.dcm": hostile, "@SUM(A1).dcm": b"not DICOM"}
    )
    table = client.get(f"/v1/batches/{job_id}/results", params={"format": "csv"})
    rows = {row["path"]: row for row in csv.DictReader(io.StringIO(table.text))}
    assert sorted(rows) == ["'-3.dcm", "'=1+2.dcm", "'@SUM(A1).dcm"]
    assert rows["'-3.dcm"]["accession_number"] == "'" + link
    assert rows["'@SUM(A1).dcm"]["error"].startswith("'@SUM(A1).dcm: ")
    for row in (rows["'=1+2.dcm"], rows["'-3.dcm"]):
        assert row["state"] == "done" and 0 <= float(row["prob_Effusion"]) <= 1
    # JSON Lines is no spreadsheet: its values are kept as they are.
    by_path = {line["path"]: line for line in _results(client, job_id)}
    assert by_path["-3.dcm"]["accession_number"] == link


def test_batch_request_with_an_unknown_key_is_refused(
    make_client: Callable[..., TestClient], export_root: Path
) -> None:
    client = make_client(batch_roots=[export_root], run_batch_jobs=False)
    for body in (
        {"path": "export1", "report": "reports.csv"},
        {"path": "export1", "dicomweb": None, "extra": 1},
        {"dicomweb": {"since": "2024-05-01", "pushh": ["sr"]}},
    ):
        response = client.post("/v1/batches", json=body)
        assert response.status_code == 422, (body, response.text)
        assert "extra_forbidden" in [e["type"] for e in response.json()["detail"]]
    assert client.get("/v1/batches").json() == []


@pytest.mark.parametrize(
    ("body", "message"),
    [
        ({}, "no source: give `path`"),
        ({"reports": "reports.csv"}, "no source: give `path`"),
        ({"path": "export1", "dicomweb": {}}, "two sources"),
    ],
)
def test_batch_request_says_whether_no_source_or_two_were_given(
    make_client: Callable[..., TestClient], export_root: Path, body: dict[str, Any], message: str
) -> None:
    client = make_client(batch_roots=[export_root], run_batch_jobs=False)
    response = client.post("/v1/batches", json=body)
    assert response.status_code == 422, response.text
    (error,) = response.json()["detail"]
    assert message in error["msg"]


@pytest.mark.parametrize("field", ["path", "reports"])
def test_batch_request_with_an_empty_path_is_refused(
    make_client: Callable[..., TestClient], export_root: Path, field: str
) -> None:
    client = make_client(batch_roots=[export_root], run_batch_jobs=False)
    body = {"path": "export1", "reports": "reports.csv", field: ""}
    response = client.post("/v1/batches", json=body)
    assert response.status_code == 422, response.text
    (error,) = response.json()["detail"]
    assert error["loc"] == ["body", field] and error["type"] == "string_too_short"


def test_batch_validation_error_has_the_shape_of_every_other_route(
    make_client: Callable[..., TestClient], export_root: Path
) -> None:
    client = make_client(batch_roots=[export_root], run_batch_jobs=False)
    batch = client.post("/v1/batches", json={"path": 7}).json()
    report = client.post("/v1/reports/label", json={"text": 7}).json()
    assert batch["error"] == report["error"] == "RequestValidationError"
    for body in (batch, report):
        assert isinstance(body["detail"], list) and body["detail"]
        assert all(set(e) == {"loc", "msg", "type"} for e in body["detail"])
        assert all(e["loc"][0] == "body" for e in body["detail"])
    assert batch["detail"] == [
        {"loc": ["body", "path"], "msg": "Input should be a valid string", "type": "string_type"}
    ]


@pytest.mark.issue(42)
def test_a_long_batch_job_yields_to_a_waiting_one(
    make_client: Callable[..., TestClient], export_root: Path
) -> None:
    # Before: one FIFO worker ran each job to its end, so a zip of four slow files held
    # another user's one-file job for 491 s. Here every job's turn is one chunk of one file.
    from dicom_factory import build_dataset, chest_pixels, write

    small = export_root / "small"
    small.mkdir()
    write(build_dataset(pixels=chest_pixels(64, 64)), small / "IM1.dcm")
    client = make_client(batch_roots=[export_root], batch_chunk_size=1, batch_job_slice_s=0.001)
    long_id = client.post("/v1/batches", json={"path": "export1"}).json()["id"]
    short_id = client.post("/v1/batches", json={"path": "small"}).json()["id"]
    short = wait_for_job(client, short_id)
    assert short["state"] == "done"
    midway = client.get(f"/v1/batches/{long_id}").json()
    long = wait_for_job(client, long_id)
    assert long["state"] == "done" and long["pending"] == 0
    assert midway["pending"] > 0  # the short job was done while the long one had files left
    assert short["finished_at"] < long["finished_at"]
    _check_every_file_once(_results(client, long_id))
