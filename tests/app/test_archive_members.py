"""Zip members that cannot be extracted fail (or are skipped) alone (issue 18 item 16).

An encrypted member, a 300-character name and a file named like a folder used to pass
the upload check (202) and then fail the whole job, so the good members were never read.
"""

from __future__ import annotations

import io
import json
import subprocess
import sys
import zipfile
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from fastapi.testclient import TestClient
from service_fixtures import dx_bytes, wait_for_job

from batch.archive import MemberProblem, UnsafeArchiveError, ZipLimits, check_zip, extract_zip
from batch.sources import ZipSource

pytestmark = pytest.mark.issue(18)

LIMITS = ZipLimits(max_total_bytes=10 * 2**20, max_ratio=100, max_members=20)
LONG = "x" * 300 + ".dcm"


def _set_encrypted(data: bytes, name: str) -> bytes:
    """Set the 'encrypted' flag (bit 0) of `name` in its local and central headers.

    zipfile cannot write encrypted members; with the flag set it refuses to read one
    exactly as it refuses a real ZipCrypto or AES member.
    """
    out = bytearray(data)
    encoded = name.encode()
    for signature, flag_at, name_at in ((b"PK\x03\x04", 6, 30), (b"PK\x01\x02", 8, 46)):
        start = 0
        while (at := out.find(signature, start)) >= 0:
            if out[at + name_at : at + name_at + len(encoded)] == encoded:
                out[at + flag_at] |= 0x01
            start = at + 4
    return bytes(out)


def _corrupt_crc(data: bytes, name: str) -> bytes:
    """Flip the stored CRC-32 of `name` in both headers: extraction finds a bad CRC."""
    out = bytearray(data)
    encoded = name.encode()
    for signature, crc_at, name_at in ((b"PK\x03\x04", 14, 30), (b"PK\x01\x02", 16, 46)):
        at = out.find(signature)
        while at >= 0:
            if out[at + name_at : at + name_at + len(encoded)] == encoded:
                out[at + crc_at] ^= 0xFF
            at = out.find(signature, at + 4)
    return bytes(out)


def hostile_zip() -> bytes:
    """Two good DICOMs beside an encrypted one, a 304-character name, a file and a folder
    both named `clash`, and a member with a bad CRC."""
    buffer = io.BytesIO()
    with zipfile.ZipFile(buffer, "w", zipfile.ZIP_DEFLATED) as zf:
        zf.writestr("good/IM1.dcm", dx_bytes())
        zf.writestr("secret.dcm", dx_bytes())
        zf.writestr(f"long/{LONG}", dx_bytes())
        zf.writestr("clash", b"a file")
        zf.writestr("clash/IM3.dcm", dx_bytes())
        zf.writestr("broken.dcm", dx_bytes())
        zf.writestr("good/IM2.dcm", dx_bytes())
    return _corrupt_crc(_set_encrypted(buffer.getvalue(), "secret.dcm"), "broken.dcm")


def test_extract_zip_leaves_out_bad_members_and_extracts_the_rest(tmp_path: Path) -> None:
    path = tmp_path / "x.zip"
    path.write_bytes(hostile_zip())
    check_zip(path, LIMITS)  # accepted: the good members make it worth a job
    problems = extract_zip(path, tmp_path / "out", LIMITS)
    by_key = {p.key: p for p in problems}
    assert set(by_key) == {"secret.dcm", f"long/{LONG}", "clash", "broken.dcm"}
    assert by_key["secret.dcm"].kind == "invalid" and "encrypted" in by_key["secret.dcm"].reason
    assert "304 bytes; the limit is 255" in by_key[f"long/{LONG}"].reason
    assert by_key["clash"].kind == "ignored" and "folder of the same name" in by_key["clash"].reason
    assert "corrupt" in by_key["broken.dcm"].reason and "CRC" in by_key["broken.dcm"].reason
    extracted = sorted(
        p.relative_to(tmp_path / "out").as_posix()
        for p in (tmp_path / "out").rglob("*")
        if p.is_file()
    )
    assert extracted == ["clash/IM3.dcm", "good/IM1.dcm", "good/IM2.dcm"]


def test_extract_zip_folder_entry_after_a_file_of_its_name(tmp_path: Path) -> None:
    buffer = io.BytesIO()
    with zipfile.ZipFile(buffer, "w") as zf:
        zf.writestr("a", b"file first")
        zf.writestr("b.dcm", b"ok")
        zf.writestr(zipfile.ZipInfo("a/"), b"")  # then a folder entry of the same name
    path = tmp_path / "x.zip"
    path.write_bytes(buffer.getvalue())
    problems = extract_zip(path, tmp_path / "out", LIMITS)
    assert [(p.key, p.kind) for p in problems] == [("a", "ignored")]
    assert (tmp_path / "out/a").is_dir() and (tmp_path / "out/b.dcm").read_bytes() == b"ok"


def test_check_zip_refuses_an_archive_of_which_nothing_can_be_read(tmp_path: Path) -> None:
    buffer = io.BytesIO()
    with zipfile.ZipFile(buffer, "w") as zf:
        zf.writestr("a.dcm", b"1")
        zf.writestr("b.dcm", b"2")
    path = tmp_path / "x.zip"
    path.write_bytes(_set_encrypted(_set_encrypted(buffer.getvalue(), "a.dcm"), "b.dcm"))
    with pytest.raises(UnsafeArchiveError, match="none of the zip's 2 files can be read"):
        check_zip(path, LIMITS)


def test_zip_source_resumes_with_the_recorded_problems(tmp_path: Path) -> None:
    path = tmp_path / "x.zip"
    path.write_bytes(hostile_zip())
    first = list(ZipSource(path, tmp_path / "job/export", LIMITS).scan())
    path.unlink()  # a resumed job finds the marker and does not extract again
    again = list(ZipSource(path, tmp_path / "job/export", LIMITS).scan())
    assert [(i.key, i.kind, i.note) for i in again] == [(i.key, i.kind, i.note) for i in first]
    kinds = {i.key: i.kind for i in first}
    assert kinds["secret.dcm"] == "invalid" and kinds["clash"] == "ignored"
    assert kinds["good/IM1.dcm"] == "image"
    assert MemberProblem("clash", "ignored", "x").key == "clash"


def _results(client: TestClient, job_id: str) -> dict[str, dict[str, Any]]:
    response = client.get(f"/v1/batches/{job_id}/results")
    assert response.status_code == 200, response.text
    return {line["path"]: line for line in map(json.loads, response.text.splitlines())}


def test_batch_zip_with_bad_members_processes_the_good_ones(
    make_client: Callable[..., TestClient],
) -> None:
    client = make_client(model=False)
    response = client.post(
        "/v1/batches", files={"file": ("e.zip", hostile_zip(), "application/zip")}
    )
    assert response.status_code == 202, response.text
    job = wait_for_job(client, response.json()["id"])
    assert job["state"] == "done", job
    lines = _results(client, job["id"])
    for good in ("good/IM1.dcm", "good/IM2.dcm", "clash/IM3.dcm"):
        assert lines[good]["state"] == "done", lines[good]
    assert lines["secret.dcm"]["state"] == "failed"
    assert "encrypted" in lines["secret.dcm"]["error"]
    assert lines[f"long/{LONG}"]["state"] == "failed"
    assert "per file or folder name" in lines[f"long/{LONG}"]["error"]
    assert lines["broken.dcm"]["state"] == "failed"
    assert lines["clash"]["state"] == "skipped"
    assert "folder of the same name" in lines["clash"]["reason"]


def test_batch_zip_of_only_encrypted_members_is_422_at_upload(
    make_client: Callable[..., TestClient],
) -> None:
    buffer = io.BytesIO()
    with zipfile.ZipFile(buffer, "w") as zf:
        zf.writestr("a.dcm", dx_bytes())
    data = _set_encrypted(buffer.getvalue(), "a.dcm")
    client = make_client(model=False)
    response = client.post("/v1/batches", files={"file": ("e.zip", data, "application/zip")})
    assert response.status_code == 422, response.text
    assert "encrypted" in response.json()["detail"]


def test_cli_batch_zip_with_bad_members(tmp_path: Path) -> None:
    path = tmp_path / "e.zip"
    path.write_bytes(hostile_zip())
    out = tmp_path / "out.jsonl"
    run = subprocess.run(
        [sys.executable, "-m", "app.cli", "batch", str(path), "-o", str(out)],
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert run.returncode == 1, run.stderr  # some files failed
    lines = {line["path"]: line for line in map(json.loads, out.read_text().splitlines())}
    assert lines["good/IM1.dcm"]["state"] == "done"
    assert lines["secret.dcm"]["state"] == "failed"
    assert "3 done, 1 skipped, 3 failed" in run.stderr
