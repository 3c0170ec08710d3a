"""Batch submissions with sloppy or hostile input, refused at submission with a clear 422
(control characters in paths and zip names, duplicate zip members, unreadable reports
CSVs), a symlinked subfolder recorded as skipped, and text with NUL stored on both
databases."""

from __future__ import annotations

import io
import json
import subprocess
import sys
import zipfile
from collections.abc import Callable
from pathlib import Path

import pytest
from fastapi.testclient import TestClient
from service_fixtures import dx_bytes, wait_for_job, write_reports_csv

from batch.archive import UnsafeArchiveError, ZipLimits, check_zip

pytestmark = pytest.mark.issue(7)


@pytest.fixture
def roots(tmp_path: Path) -> Path:
    root = tmp_path / "roots"
    (root / "ward3").mkdir(parents=True)
    (root / "ward3" / "IM1.dcm").write_bytes(dx_bytes())
    write_reports_csv(root / "reports.csv")
    return root


def _zip(members: list[tuple[str, bytes]]) -> bytes:
    buffer = io.BytesIO()
    with zipfile.ZipFile(buffer, "w") as zf:
        for name, data in members:
            zf.writestr(name, data)
    return buffer.getvalue()


@pytest.mark.parametrize("bad", ["\x00", "\x01", "\n", "\x7f", "\x1b[31m"])
@pytest.mark.parametrize("field", ["path", "reports"])
def test_control_characters_in_paths_are_422(
    make_client: Callable[..., TestClient], roots: Path, field: str, bad: str
) -> None:
    client = make_client(batch_roots=[roots])
    body = {"path": "ward3", "reports": "reports.csv"}
    body[field] = f"ward3{bad}x"
    response = client.post("/v1/batches", json=body)
    assert response.status_code == 422, response.text
    detail = json.dumps(response.json())
    assert field in detail and "control character" in detail


def test_control_characters_in_dicomweb_study_uids_are_422(client: TestClient) -> None:
    body = {"dicomweb": {"study": ["1.2.3\x00.4"]}}
    response = client.post("/v1/batches", json=body)
    assert response.status_code == 422, response.text
    assert "study" in response.text


def test_control_characters_in_zip_member_names_are_422(client: TestClient) -> None:
    # (zipfile cuts a name at NUL when reading, so NUL cannot reach the checks.)
    data = _zip([("ward\x01/a\x1b.dcm", dx_bytes()), ("b.dcm", dx_bytes())])
    response = client.post("/v1/batches", files={"file": ("e.zip", data, "application/zip")})
    assert response.status_code == 422, response.text
    assert "control character" in response.text


def test_duplicate_zip_members_are_422_naming_the_name(client: TestClient, tmp_path: Path) -> None:
    import warnings

    with warnings.catch_warnings():  # zipfile warns about the duplicate it writes
        warnings.simplefilter("ignore")
        data = _zip([("s/a.dcm", dx_bytes()), ("s/b.dcm", dx_bytes()), ("s/a.dcm", dx_bytes())])
    response = client.post("/v1/batches", files={"file": ("e.zip", data, "application/zip")})
    assert response.status_code == 422, response.text
    assert "two members named 's/a.dcm'" in response.json()["detail"]
    # The same name spelled with a backslash or "./" is the same file once extracted.
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        path = tmp_path / "x.zip"
        path.write_bytes(_zip([("s/a.dcm", b"1"), ("s\\a.dcm", b"2")]))
    with pytest.raises(UnsafeArchiveError, match="two members"):
        check_zip(path, ZipLimits(2**30, 100.0, 100))


NOT_UTF8 = "AccessionNumber,report\nA1,Small left effusion.\nA2,Cr\u00e8me\n".encode("latin-1")
NO_KEY = b"patient,report\nx,Small left effusion.\n"


@pytest.mark.parametrize(
    ("content", "expected"),
    [
        (NOT_UTF8, "not a UTF-8 CSV file: byte 0xe8 at offset 52"),
        (NO_KEY, "no AccessionNumber or StudyInstanceUID column (found: patient, report)"),
        (b"AccessionNumber,notes\nA1,x\n", "no report text column"),
        (b"", "no AccessionNumber or StudyInstanceUID column (found: no header)"),
    ],
)
def test_bad_reports_csv_is_422_at_submission(
    make_client: Callable[..., TestClient], roots: Path, content: bytes, expected: str
) -> None:
    client = make_client(batch_roots=[roots])
    (roots / "bad.csv").write_bytes(content)
    response = client.post("/v1/batches", json={"path": "ward3", "reports": "bad.csv"})
    assert response.status_code == 422, response.text
    detail = response.json()["detail"]
    assert detail.startswith("bad.csv: ") and expected in detail, detail
    assert str(roots) not in response.text

    zip_data = _zip([("IM1.dcm", dx_bytes())])
    response = client.post(
        "/v1/batches",
        files={
            "file": ("e.zip", zip_data, "application/zip"),
            "reports": ("ward3.csv", content, "text/csv"),
        },
    )
    assert response.status_code == 422, response.text
    assert response.json()["detail"].startswith("ward3.csv: ")
    assert expected in response.json()["detail"]
    assert client.get("/v1/batches").json() == []


def test_cli_batch_bad_reports_csv_is_one_line_exit_2(roots: Path, tmp_path: Path) -> None:
    (tmp_path / "bad.csv").write_bytes(NOT_UTF8)
    proc = subprocess.run(
        [sys.executable, "-m", "app.cli", "batch", str(roots / "ward3"), "--reports",
         str(tmp_path / "bad.csv"), "--output", str(tmp_path / "out.jsonl")],
        capture_output=True, text=True, timeout=120, cwd=Path(__file__).parents[2],
    )  # fmt: skip
    assert proc.returncode == 2, proc.stderr
    lines = proc.stderr.strip().splitlines()
    assert len(lines) == 1 and "byte 0xe8 at offset 52" in lines[0], proc.stderr


def test_symlinked_subfolder_is_skipped_not_followed(
    make_client: Callable[..., TestClient], roots: Path, tmp_path: Path
) -> None:
    outside = tmp_path / "outside"
    outside.mkdir()
    (outside / "secret.dcm").write_bytes(dx_bytes())
    (roots / "ward3" / "linked").symlink_to(outside, target_is_directory=True)
    (roots / "ward3" / "inner").mkdir()
    (roots / "ward3" / "inner-link").symlink_to(roots / "ward3" / "inner")
    client = make_client(batch_roots=[roots], model=False)
    response = client.post("/v1/batches", json={"path": "ward3"})
    assert response.status_code == 202, response.text
    job = wait_for_job(client, response.json()["id"])
    assert job["state"] == "done", job
    lines = client.get(f"/v1/batches/{job['id']}/results").text.splitlines()
    by_path = {line["path"]: line for line in map(json.loads, lines)}
    assert set(by_path) == {"IM1.dcm", "linked", "inner-link"}
    for key in ("linked", "inner-link"):
        assert by_path[key]["state"] == "skipped"
        assert by_path[key]["reason"] == "symbolic link: not followed"


def test_report_text_with_nul_is_stored(make_client: Callable[..., TestClient]) -> None:
    """Runs on SQLite and, with CXR_TEST_POSTGRES_URL, on PostgreSQL (JSONB refuses NUL)."""
    from sqlalchemy import create_engine, text

    client = make_client(store_report_text=True)
    report = "Small left\x00 effusion.\x00"
    response = client.post("/v1/reports/label", json={"text": report})
    assert response.status_code == 200, response.text
    assert response.json()["labels"]["Effusion"] == "positive"
    settings = client.app.state.cxr.settings  # type: ignore[attr-defined]
    engine = create_engine(settings.resolved_database_url)
    try:
        with engine.connect() as conn:
            stored = conn.execute(text("SELECT mentions FROM label_results")).scalar_one()
    finally:
        engine.dispose()
    mentions = json.loads(stored) if isinstance(stored, str) else stored
    effusion = next(m for m in mentions if m["label"] == "Effusion")
    sentence = effusion.get("sentence") or effusion["text"]
    assert "\x00" not in json.dumps(mentions) and "\ufffd" in sentence
    # One character for one: offsets into the report still point at the words.
    start, end = effusion["start"], effusion["end"]
    assert report[start:end].replace("\x00", "\ufffd") == effusion["text"]


def test_storable_replaces_one_for_one() -> None:
    from app.crud import storable

    value = {"a\x00": ["x\x00y", "\ud800z", 3, None], "b": ("ok",)}
    assert storable(value) == {"a\ufffd": ["x\ufffdy", "\ufffdz", 3, None], "b": ["ok"]}
