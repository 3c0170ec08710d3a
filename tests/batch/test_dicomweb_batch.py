"""The DICOMweb source and the DICOM push sink on the batch engine, against a scripted
DICOMweb server (httpx.MockTransport); the real-Orthanc version is
tests/app/test_pacs_orthanc.py."""

from __future__ import annotations

import io
from pathlib import Path
from typing import Any

import httpx
import pydicom
import pytest
from service_fixtures import build_dataset, chest_pixels, to_bytes

from batch.dicom_push import DicomPushSink
from batch.dicomweb_source import DicomwebSource, ref_from_key
from batch.engine import plan, run
from batch.interfaces import Sink
from batch.pacs.dicomweb import DicomwebClient, DicomwebError, parse_multipart
from batch.processor import BatchProcessor
from batch.results import outcome_line

pytestmark = pytest.mark.issue(10)


class FakePacs:
    """QIDO/WADO/STOW over a dict of instances; STOW can be told to refuse."""

    def __init__(self, datasets: list[pydicom.Dataset]) -> None:
        self.instances = {ds.SOPInstanceUID: ds for ds in datasets}
        self.stored: list[pydicom.Dataset] = []
        self.refuse = False
        self.retrieved: list[str] = []

    def __call__(self, request: httpx.Request) -> httpx.Response:
        parts = request.url.path.removeprefix("/dicom-web/").split("/")
        data = list(self.instances.values())
        if request.method == "POST":
            if self.refuse:
                return httpx.Response(409, text="storage full")
            bodies = parse_multipart(request.headers["content-type"], request.content)
            new = [pydicom.dcmread(io.BytesIO(b)) for _, b in bodies]
            self.stored += new
            refs = [{"00081155": {"vr": "UI", "Value": [d.SOPInstanceUID]}} for d in new]
            return httpx.Response(200, json={"00081199": {"vr": "SQ", "Value": refs}})
        if parts == ["studies"]:
            studies = {d.StudyInstanceUID for d in data}
            return httpx.Response(200, json=[_tag("0020000D", s) for s in sorted(studies)])
        if len(parts) == 3 and parts[2] == "series":
            series = {
                (d.SeriesInstanceUID, d.Modality) for d in data if d.StudyInstanceUID == parts[1]
            }
            return httpx.Response(
                200,
                json=[
                    _tag("0020000E", uid) | {"00080060": {"vr": "CS", "Value": [modality]}}
                    for uid, modality in sorted(series)
                ],
            )
        if len(parts) == 5 and parts[4] == "instances":
            found = [d for d in data if d.SeriesInstanceUID == parts[3]]
            return httpx.Response(
                200,
                json=[
                    _tag("00080018", d.SOPInstanceUID) | _tag("00080016", d.SOPClassUID)
                    for d in found
                ],
            )
        if len(parts) == 6 and parts[5] in self.instances:
            self.retrieved.append(parts[5])
            body = to_bytes(self.instances[parts[5]])
            multipart = b"--x\r\nContent-Type: application/dicom\r\n\r\n" + body + b"\r\n--x--\r\n"
            ctype = 'multipart/related; type="application/dicom"; boundary=x'
            return httpx.Response(200, content=multipart, headers={"content-type": ctype})
        return httpx.Response(404, text="no such resource")


def _tag(tag: str, value: str) -> dict[str, Any]:
    return {tag: {"vr": "UI", "Value": [value]}}


class Lines(Sink):
    def __init__(self) -> None:
        self.lines: list[dict[str, Any]] = []

    def write(self, outcomes: Any) -> None:
        self.lines += [outcome_line(o) for o in outcomes]


def _run(pacs: FakePacs, predictor: Any, labeler: Any, tmp_path: Path, recorded: Any = ()) -> Any:
    client = DicomwebClient("http://pacs.test/dicom-web", transport=httpx.MockTransport(pacs))
    source = DicomwebSource(
        client, modalities=["CR", "DX"], workdir=tmp_path / "work", keep_headers=True
    )
    processor = BatchProcessor(source, labeler=labeler, predictor=predictor)
    push = DicomPushSink(
        client, kinds=["sr", "gsps"], card=predictor.card, headers=source.pop_header
    )
    out = Lines()
    items = plan(list(source.scan()), list(recorded), processor)
    run(items, processor, [push, out], chunk_size=4)
    source.close()
    return out.lines


@pytest.fixture(scope="module")
def labeler() -> Any:
    from batch.labeling import PipelineLabeler

    return PipelineLabeler()


def test_dicomweb_batch_pulls_images_pushes_results_and_resumes(
    demo_predictor: Any, labeler: Any, tmp_path: Path
) -> None:
    study = pydicom.uid.generate_uid()
    images = [build_dataset(pixels=chest_pixels(64, 64, seed=i), study_uid=study) for i in range(3)]
    ct = build_dataset(pixels=chest_pixels(64, 64), modality="CT", study_uid=study)
    pacs = FakePacs([*images, ct])

    lines = _run(pacs, demo_predictor, labeler, tmp_path)
    assert len(lines) == 3 and all(line["state"] == "done" for line in lines)
    assert {ref_from_key(line["path"]).sop_instance_uid for line in lines} == {
        ds.SOPInstanceUID for ds in images
    }
    assert ct.SOPInstanceUID not in pacs.retrieved
    assert [d.Modality for d in pacs.stored].count("SR") == 3
    assert all(len(line["pushed"]) == 2 for line in lines)
    assert not list((tmp_path / "work").glob("*.dcm"))  # downloads removed once read

    # Resuming with every line recorded: nothing retrieved, predicted or pushed again.
    pacs.retrieved.clear()
    before = len(pacs.stored)
    assert _run(pacs, demo_predictor, labeler, tmp_path, recorded=lines) == []
    assert pacs.retrieved == [] and len(pacs.stored) == before


def test_dicomweb_batch_records_refused_pushes_and_missing_instances(
    demo_predictor: Any, labeler: Any, tmp_path: Path
) -> None:
    images = [build_dataset(pixels=chest_pixels(64, 64)) for _ in range(2)]
    pacs = FakePacs(images)
    pacs.refuse = True
    gone = images[1].SOPInstanceUID
    real_call = pacs.__call__

    def flaky(request: httpx.Request) -> httpx.Response:
        if request.url.path.endswith(gone):  # deleted between search and retrieval
            return httpx.Response(404, text="Unknown resource")
        return real_call(request)

    client = DicomwebClient("http://pacs.test/dicom-web", transport=httpx.MockTransport(flaky))
    source = DicomwebSource(client, workdir=tmp_path / "work", keep_headers=True)
    processor = BatchProcessor(source, labeler=labeler, predictor=demo_predictor)
    push = DicomPushSink(client, kinds=["sr"], card=demo_predictor.card, headers=source.pop_header)
    out = Lines()
    run(list(source.scan()), processor, [push, out], chunk_size=4)
    by_uid = {ref_from_key(line["path"]).sop_instance_uid: line for line in out.lines}
    assert by_uid[gone]["state"] == "failed" and "HTTP 404" in by_uid[gone]["error"]
    pushed = by_uid[images[0].SOPInstanceUID]
    assert pushed["state"] == "failed" and pushed["prediction"] is not None
    assert "push failed" in pushed["error"] and "HTTP 409" in pushed["error"]


def test_dicom_push_sink_refuses_unknown_kinds() -> None:
    client = DicomwebClient("http://pacs.test/dicom-web")
    with pytest.raises(ValueError, match="expected sr, gsps"):
        DicomPushSink(client, kinds=["pdf"], card={}, headers=lambda key: None)
    with pytest.raises(DicomwebError):
        ref_from_key("studies/1/series/../instances/3")
