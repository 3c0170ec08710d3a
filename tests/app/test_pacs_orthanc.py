"""Against a real Orthanc (started by .ci/orthanc.sh; skipped without CXR_TEST_ORTHANC_URL):
DICOMweb pull and push, SR and GSPS in the right study, Orthanc C-STORE to `cxr listen`."""

from __future__ import annotations

import io
import json
import os
import signal
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pydicom
import pytest
from service_fixtures import CT_STORAGE, build_dataset, chest_pixels, free_port, to_bytes

from batch.pacs.dicomweb import DicomwebClient
from batch.pacs.documents import build_gsps, build_sr

ORTHANC_URL = os.environ.get("CXR_TEST_ORTHANC_URL")
AUTH = (
    os.environ.get("CXR_TEST_ORTHANC_USER", ""),
    os.environ.get("CXR_TEST_ORTHANC_PASSWORD", ""),
)
ROOT = Path(__file__).resolve().parents[2]
CR_STORAGE = "1.2.840.10008.5.1.4.1.1.1"

pytestmark = [
    pytest.mark.issue(10),
    pytest.mark.orthanc,
    pytest.mark.skipif(not ORTHANC_URL, reason="CXR_TEST_ORTHANC_URL not set (.ci/orthanc.sh)"),
]


@pytest.fixture
def rest() -> Iterator[httpx.Client]:
    """Orthanc's own REST API (uploads, C-STORE jobs)."""
    assert ORTHANC_URL is not None
    with httpx.Client(base_url=ORTHANC_URL, auth=AUTH if AUTH[0] else None, timeout=30) as c:
        yield c


@pytest.fixture
def web() -> Iterator[DicomwebClient]:
    assert ORTHANC_URL is not None
    with DicomwebClient(
        f"{ORTHANC_URL}/dicom-web", user=AUTH[0] or None, password=AUTH[1] or None, timeout=30
    ) as client:
        yield client


def _upload(rest: httpx.Client, ds: pydicom.Dataset) -> str:
    response = rest.post("/instances", content=to_bytes(ds))
    response.raise_for_status()
    return str(response.json()["ID"])


def _study(**elements: Any) -> list[pydicom.Dataset]:
    """One study: a CR, a DX and a CT image (the CT must be left alone)."""
    study = pydicom.uid.generate_uid()
    common = {"study_uid": study, "StudyDate": "20240312", "PatientBirthDate": ""} | elements
    return [
        build_dataset(pixels=chest_pixels(64, 72), modality="CR", sop_class=CR_STORAGE, **common),
        build_dataset(pixels=chest_pixels(80, 64, seed=1), **common),
        build_dataset(pixels=chest_pixels(64, 64), modality="CT", sop_class=CT_STORAGE, **common),
    ]


def _results_in(web: DicomwebClient, study: str) -> dict[str, list[pydicom.Dataset]]:
    """The SR and PR instances of a study, fetched back over WADO-RS."""
    out: dict[str, list[pydicom.Dataset]] = {"SR": [], "PR": []}
    for ref in web.search_instances(study, modalities=("SR", "PR")):
        out[str(ref.modality)].append(pydicom.dcmread(io.BytesIO(web.retrieve_instance(ref))))
    return out


def test_orthanc_dicomweb_pull_predict_push_round_trip(
    rest: httpx.Client, web: DicomwebClient, demo_predictor: Any
) -> None:
    from models.dicom import read_dicom

    images = _study()
    for ds in images:
        _upload(rest, ds)
    study = images[0].StudyInstanceUID
    assert study in web.search_studies(modalities=("CR", "DX"), since=None)
    refs = list(web.iter_instances(study_uids=[study], modalities=("CR", "DX")))
    assert sorted(r.sop_instance_uid for r in refs) == sorted(
        ds.SOPInstanceUID for ds in images[:2]
    )
    for ref in refs:
        data = web.retrieve_instance(ref)
        header = pydicom.dcmread(io.BytesIO(data), stop_before_pixels=True)
        [prediction] = demo_predictor.predict([read_dicom(data).pixels], heatmaps="none")
        objects = [build_sr(header, prediction, demo_predictor.card)]
        objects.append(build_gsps(header, prediction, demo_predictor.card))
        outcome = web.store([to_bytes(o) for o in objects])
        assert outcome.stored == [o.SOPInstanceUID for o in objects] and not outcome.failed
        again = web.store([to_bytes(o) for o in objects])  # a retry does not duplicate
        assert not again.failed

    results = _results_in(web, study)
    assert len(results["SR"]) == 2 and len(results["PR"]) == 2
    image_uids = {ds.SOPInstanceUID for ds in images[:2]}
    for sr in results["SR"]:
        assert sr.StudyInstanceUID == study and sr.PatientID == images[0].PatientID
        assert sr.CurrentRequestedProcedureEvidenceSequence[0].StudyInstanceUID == study
        evidence = sr.CurrentRequestedProcedureEvidenceSequence[0].ReferencedSeriesSequence[0]
        assert evidence.ReferencedSOPSequence[0].ReferencedSOPInstanceUID in image_uids
    referenced = {
        pr.ReferencedSeriesSequence[0].ReferencedImageSequence[0].ReferencedSOPInstanceUID
        for pr in results["PR"]
    }
    assert referenced == image_uids
    # Nothing was pulled from or pushed for the CT.
    ct = images[2].SOPInstanceUID
    assert all(ct not in json.dumps(sr.to_json_dict()) for sr in results["SR"])


def _study_results(rest: httpx.Client, study: str) -> dict[str, int]:
    """How many SR and PR instances Orthanc holds for a study (counts duplicates too)."""
    found = rest.post("/tools/find", json={"Level": "Study", "Query": {"StudyInstanceUID": study}})
    [orthanc_id] = found.json()
    counts = {"SR": 0, "PR": 0, "CR": 0, "DX": 0, "CT": 0}
    for series in rest.get(f"/studies/{orthanc_id}/series").json():
        modality = series["MainDicomTags"].get("Modality", "")
        counts[modality] = counts.get(modality, 0) + len(series["Instances"])
    return counts


def test_orthanc_cxr_batch_dicomweb_round_trip_resumes_without_duplicates(
    rest: httpx.Client,
    web: DicomwebClient,
    demo_checkpoint: Path,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
) -> None:
    from app.cli import main

    images = _study()
    for ds in images:
        _upload(rest, ds)
    study = images[0].StudyInstanceUID
    out = tmp_path / "pacs.jsonl"
    monkeypatch.setenv("CXR_DICOMWEB_PASSWORD", AUTH[1])
    command = [
        "batch", "--dicomweb", f"{ORTHANC_URL}/dicom-web", "--study", study,
        "--since", "2024-03-01", "--modality", "CR,DX", "-o", str(out),
        "--model", str(demo_checkpoint), "--device", "cpu", "--push", "sr,gsps",
    ] + (["--user", AUTH[0]] if AUTH[0] else [])  # fmt: skip
    assert main(command) == 0, capsys.readouterr().err
    lines = [json.loads(x) for x in out.read_text().splitlines()]
    expected = {
        f"studies/{study}/series/{ds.SeriesInstanceUID}/instances/{ds.SOPInstanceUID}"
        for ds in images[:2]
    }
    assert {line["path"] for line in lines} == expected  # the CT was not pulled
    assert all(line["state"] == "done" and len(line["pushed"]) == 2 for line in lines)
    assert all(line["prediction"]["probabilities"] for line in lines)
    assert _study_results(rest, study) == {"SR": 2, "PR": 2, "CR": 1, "DX": 1, "CT": 1}
    results = _results_in(web, study)
    referenced = {
        pr.ReferencedSeriesSequence[0].ReferencedImageSequence[0].ReferencedSOPInstanceUID
        for pr in results["PR"]
    }
    assert referenced == {ds.SOPInstanceUID for ds in images[:2]}

    # Resume: nothing new to do, nothing pushed again, OUT unchanged.
    before = out.read_text()
    assert main([*command, "--resume"]) == 0
    assert "resumed after 2 files" in capsys.readouterr().err
    assert out.read_text() == before
    # A full rerun pushes again, but the same UIDs: still one SR and one GSPS per image.
    assert main(command) == 0
    assert _study_results(rest, study) == {"SR": 2, "PR": 2, "CR": 1, "DX": 1, "CT": 1}


def test_orthanc_cxr_batch_dicomweb_errors_are_one_line(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    from app.cli import main

    out = tmp_path / "x.jsonl"
    url = f"{ORTHANC_URL}/dicom-web"
    assert (
        main(["batch", "--dicomweb", url, "--user", "cxr", "--password", "bad", "-o", str(out)])
        == 2
    )
    err = capsys.readouterr().err
    assert f"GET {url}/studies: HTTP 401" in err and "bad" not in err.replace("--password", "")


@pytest.mark.slow
def test_orthanc_pushes_by_c_store_to_cxr_listen(
    rest: httpx.Client, web: DicomwebClient, demo_checkpoint: Path, tmp_path: Path
) -> None:
    port = free_port()
    # The same entry .ci/orthanc.sh configures, on this test's free port.
    modality = {"AET": "CXRLISTEN", "Host": "127.0.0.1", "Port": port}
    rest.put("/modalities/cxr-test", json=modality).raise_for_status()
    out = tmp_path / "listen.jsonl"
    env = os.environ | {
        "PYTHONPATH": str(ROOT),
        "CXR_DICOMWEB_PASSWORD": AUTH[1],
    }
    command = [
        sys.executable, "-m", "app.cli", "listen", "--host", "127.0.0.1", "--port", str(port),
        "--ae-title", "CXRLISTEN", "--model", str(demo_checkpoint), "--device", "cpu",
        "--out", str(out), "--allow-ae", "ORTHANC", "--forward", f"{ORTHANC_URL}/dicom-web",
        "--user", AUTH[0], "--log-level", "warning",
    ]  # fmt: skip
    listener = subprocess.Popen(command, cwd=tmp_path, env=env, stderr=subprocess.PIPE, text=True)
    try:
        assert listener.stderr is not None
        banner = listener.stderr.readline()  # written once the port is bound
        assert banner.startswith("cxr listen: CXRLISTEN on 127.0.0.1"), banner
        images = _study()
        ids = [_upload(rest, ds) for ds in images[:2]]
        response = rest.post("/modalities/cxr-test/store", json={"Resources": ids, "Timeout": 30})
        assert response.status_code == 200, response.text
        deadline = time.monotonic() + 60
        lines: list[dict[str, Any]] = []
        while time.monotonic() < deadline and len(lines) < 2:
            time.sleep(0.5)
            if out.exists():
                lines = [json.loads(x) for x in out.read_text().splitlines() if x.strip()]
        assert sorted(line["path"] for line in lines) == sorted(
            ds.SOPInstanceUID for ds in images[:2]
        )
        assert all(line["state"] == "done" and line["calling_ae"] == "ORTHANC" for line in lines)
        assert all(len(line["pushed"]) == 2 for line in lines)
        results = _results_in(web, images[0].StudyInstanceUID)
        assert len(results["SR"]) == 2 and len(results["PR"]) == 2
    finally:
        listener.send_signal(signal.SIGINT)
        _, err = listener.communicate(timeout=60)
        rest.delete("/modalities/cxr-test")
    assert listener.returncode == 0, err
    assert "2 done, 0 skipped, 0 failed" in err


def test_orthanc_service_batch_job_pulls_and_pushes(
    make_client: Any, rest: httpx.Client, web: DicomwebClient
) -> None:
    from service_fixtures import wait_for_job

    client = make_client(
        dicomweb_url=f"{ORTHANC_URL}/dicom-web",
        dicomweb_user=AUTH[0] or None,
        dicomweb_password=AUTH[1] or None,
    )
    images = _study()
    for ds in images:
        _upload(rest, ds)
    study = images[0].StudyInstanceUID
    response = client.post(
        "/v1/batches", json={"dicomweb": {"study": [study], "push": ["sr", "gsps"]}}
    )
    assert response.status_code == 202, response.text
    job = wait_for_job(client, response.json()["id"])
    assert job["state"] == "done" and job["source_kind"] == "dicomweb"
    assert (job["total"], job["done"], job["failed"]) == (2, 2, 0)
    lines = [
        json.loads(x)
        for x in client.get(f"/v1/batches/{job['id']}/results").text.splitlines()
        if x.strip()
    ]
    assert all(len(line["pushed"]) == 2 for line in lines)
    assert _study_results(rest, study) == {"SR": 2, "PR": 2, "CR": 1, "DX": 1, "CT": 1}
    assert AUTH[1] not in json.dumps(job) if AUTH[1] else True


@pytest.mark.slow
@pytest.mark.issue(45)
def test_orthanc_cxr_batch_on_ray_pulls_pushes_writes_dataset_and_resumes(
    rest: httpx.Client,
    demo_checkpoint: Path,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
) -> None:
    # --dicomweb --push --dataset on a local Ray (its workers open their own clients).
    pytest.importorskip("ray")
    from app.cli import main

    images = _study()
    for ds in images:
        _upload(rest, ds)
    study = images[0].StudyInstanceUID
    reports = tmp_path / "reports.csv"
    reports.write_text(f"AccessionNumber,Report\n{images[0].AccessionNumber},Cardiomegaly.\n")
    key = tmp_path / "key"
    key.write_bytes(b"k" * 32)
    out, dataset = tmp_path / "pacs.jsonl", tmp_path / "dataset"
    monkeypatch.setenv("CXR_DICOMWEB_PASSWORD", AUTH[1])
    monkeypatch.setenv("RAY_USAGE_STATS_ENABLED", "0")
    command = [
        "batch", "--dicomweb", f"{ORTHANC_URL}/dicom-web", "--study", study,
        "--modality", "CR,DX", "-o", str(out), "--model", str(demo_checkpoint),
        "--device", "cpu", "--push", "sr,gsps", "--reports", str(reports),
        "--dataset", str(dataset), "--pseudonym-key", str(key), "--ray",
    ] + (["--user", AUTH[0]] if AUTH[0] else [])  # fmt: skip
    assert main(command) == 0, capsys.readouterr().err
    assert "on Ray" in capsys.readouterr().err
    lines = [json.loads(x) for x in out.read_text().splitlines()]
    assert len(lines) == 2  # the CR and the DX; the CT was not pulled
    assert all(line["state"] == "done" and len(line["pushed"]) == 2 for line in lines)
    assert all(line["report"]["source"] == "csv" for line in lines)
    assert _study_results(rest, study) == {"SR": 2, "PR": 2, "CR": 1, "DX": 1, "CT": 1}
    names = sorted(line["dataset_image"] for line in lines)
    assert sorted(p.name for p in (dataset / "images").iterdir()) == names
    entry = (dataset / "Data_Entry.csv").read_text().splitlines()
    assert len(entry) == 3 and all("Cardiomegaly" in row for row in entry[1:])

    before = out.read_text()
    assert main([*command, "--resume"]) == 0  # nothing left: nothing pulled or pushed again
    assert "resumed after 2 files" in capsys.readouterr().err
    assert out.read_text() == before
    assert (dataset / "Data_Entry.csv").read_text().splitlines() == entry
    assert _study_results(rest, study) == {"SR": 2, "PR": 2, "CR": 1, "DX": 1, "CT": 1}
