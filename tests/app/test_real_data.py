"""The service on the real DICOM files in ../shared/data/dicom (skipped when absent)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from fastapi.testclient import TestClient

from app.cli import main


def test_real_dicoms_batch_without_model(
    shared_data: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    export = shared_data / "dicom"
    out = tmp_path / "out.jsonl"
    assert main(["batch", str(export), "-o", str(out)]) == 0
    lines = {line["path"]: line for line in map(json.loads, out.read_text().splitlines())}
    images = [line for line in lines.values() if line["kind"] == "image"]
    assert len(images) == len(list(export.glob("*.dcm")))
    assert all(line["state"] == "done" and line["rows"] == 1024 for line in images)
    assert lines["README.md"]["state"] == "skipped"
    assert "0 failed" in capsys.readouterr().err


def test_real_monochrome1_dicom_predicts(shared_data: Path, client: TestClient) -> None:
    data = (shared_data / "dicom" / "Fake_MONOHR1.dcm").read_bytes()
    response = client.post(
        "/v1/images/predict", content=data, headers={"Content-Type": "application/dicom"}
    )
    assert response.status_code == 200, response.text
    body = response.json()
    assert (body["image"]["rows"], body["image"]["columns"]) == (1024, 1024)
    assert body["image"]["sop_instance_uid"]
    for box in body["boxes"]:  # original pixel coordinates
        assert 0 <= box["x"] < 1024 and box["x"] + box["width"] <= 1024.5
