"""`cxr listen` (batch/listen/listener.py): a Storage SCP fed by a pynetdicom SCU on loopback."""

from __future__ import annotations

import io
import json
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pydicom
import pytest
from pynetdicom import AE
from service_fixtures import (
    CT_STORAGE,
    GSPS_STORAGE,
    build_dataset,
    chest_pixels,
    to_bytes,
)
from troubled_decoder import troubled_instance_load

from batch.listen.listener import StoreListener
from batch.pacs.dicomweb import DicomwebClient, parse_multipart

pytestmark = pytest.mark.issue(10)


def _send(port: int, datasets: list[pydicom.Dataset], *, ae_title: str = "MODALITY") -> list[int]:
    """C-STORE each dataset; the statuses, or [] when the association is rejected."""
    ae = AE(ae_title=ae_title)
    for ds in datasets:
        ae.add_requested_context(ds.SOPClassUID, ds.file_meta.TransferSyntaxUID)
    assoc = ae.associate("127.0.0.1", port, ae_title="CXR")
    if not assoc.is_established:
        return []
    try:
        return [int(assoc.send_c_store(ds).Status) for ds in datasets]
    finally:
        assoc.release()


def _reread(ds: pydicom.Dataset) -> pydicom.Dataset:
    return pydicom.dcmread(io.BytesIO(to_bytes(ds)))


def _lines(path: Path) -> list[dict[str, Any]]:
    return [json.loads(line) for line in path.read_text().splitlines()]


@pytest.fixture(scope="module")
def labeler() -> Any:
    from batch.labeling import PipelineLabeler

    return PipelineLabeler()


@pytest.fixture
def make_listener(tmp_path: Path, labeler: Any) -> Iterator[Any]:
    started: list[StoreListener] = []

    def make(predictor: Any, **kwargs: Any) -> StoreListener:
        listener = StoreListener(predictor, out=tmp_path / "out.jsonl", labeler=labeler, **kwargs)
        listener.start("127.0.0.1", 0)  # a free port
        started.append(listener)
        return listener

    yield make
    for listener in started:
        listener.stop()


def test_listener_predicts_images_and_skips_other_objects(
    make_listener: Any, demo_predictor: Any, tmp_path: Path
) -> None:
    listener = make_listener(demo_predictor)
    image = _reread(build_dataset(pixels=chest_pixels(64, 80)))
    ct = _reread(build_dataset(pixels=chest_pixels(64, 64), modality="CT", sop_class=CT_STORAGE))
    gsps = _reread(build_dataset(modality="PR", sop_class=GSPS_STORAGE))
    assert _send(listener.port, [image, ct, gsps]) == [0, 0, 0]
    assert _send(listener.port, [image]) == [0]  # sent again: not predicted twice
    assert listener.wait_idle(30)

    lines = {line["path"]: line for line in _lines(tmp_path / "out.jsonl")}
    assert len(lines) == 3
    done = lines[image.SOPInstanceUID]
    assert done["state"] == "done" and done["kind"] == "image"
    assert done["study_instance_uid"] == image.StudyInstanceUID
    assert done["calling_ae"] == "MODALITY"
    assert set(done["prediction"]["probabilities"]) == set(demo_predictor.labels)
    assert done["demo"] is True and (done["rows"], done["columns"]) == (64, 80)
    assert lines[ct.SOPInstanceUID]["state"] == "skipped"
    assert "CT is not a projection radiograph" in lines[ct.SOPInstanceUID]["reason"]
    assert lines[gsps.SOPInstanceUID]["state"] == "skipped"
    assert "no pixel data" in lines[gsps.SOPInstanceUID]["reason"]
    assert listener.counts["duplicate"] == 1
    assert not list(listener.inbox.glob("*.dcm"))  # inbox emptied once recorded
    text = (tmp_path / "out.jsonl").read_text()
    assert "Doe" not in text and "MRN" not in text  # no patient name or ID in results


def test_listener_records_an_undecodable_image_as_failed(
    make_listener: Any, demo_predictor: Any, tmp_path: Path
) -> None:
    listener = make_listener(demo_predictor)
    broken = _reread(build_dataset(pixels=chest_pixels(64, 64)))
    broken.PixelData = broken.PixelData[:100]  # truncated pixel data
    good = _reread(build_dataset(pixels=chest_pixels(64, 64)))
    assert _send(listener.port, [broken, good]) == [0, 0]
    assert listener.wait_idle(30)
    lines = {line["path"]: line for line in _lines(tmp_path / "out.jsonl")}
    assert lines[broken.SOPInstanceUID]["state"] == "failed"
    assert lines[broken.SOPInstanceUID]["error"]
    assert lines[good.SOPInstanceUID]["state"] == "done"


def _with_uid(ds: pydicom.Dataset, uid: str) -> pydicom.Dataset:
    ds.SOPInstanceUID = ds.file_meta.MediaStorageSOPInstanceUID = uid
    return _reread(ds)


@pytest.mark.issue(19)
def test_listener_survives_instances_that_crash_or_hang_the_decoder(
    make_listener: Any, demo_predictor: Any, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    import batch.listen.decode_slots
    from batch.read_ahead import decode_failure
    from models.decode_pool import DecodePool

    def troubled_pool(*, workers: int, timeout_s: float | None) -> Any:
        return DecodePool(
            troubled_instance_load, workers=workers, on_error=decode_failure, timeout_s=timeout_s
        )

    monkeypatch.setattr(batch.listen.decode_slots, "decode_pool", troubled_pool)
    listener = make_listener(demo_predictor, file_timeout_s=3.0)
    crash = _with_uid(build_dataset(pixels=chest_pixels(64, 64)), "1.2.826.0.1.3680043.10.9.666")
    hang = _with_uid(build_dataset(pixels=chest_pixels(64, 64)), "1.2.826.0.1.3680043.10.9.777")
    good = _reread(build_dataset(pixels=chest_pixels(64, 64)))
    assert _send(listener.port, [crash, hang, good]) == [0, 0, 0]
    assert listener.wait_idle(60)
    later = _reread(build_dataset(pixels=chest_pixels(64, 64)))  # the listener goes on
    assert _send(listener.port, [later]) == [0]
    assert listener.wait_idle(60)
    lines = {line["path"]: line for line in _lines(tmp_path / "out.jsonl")}
    assert lines[crash.SOPInstanceUID]["state"] == "failed"
    assert "decoding worker crashed" in lines[crash.SOPInstanceUID]["error"]
    assert lines[hang.SOPInstanceUID]["state"] == "failed"
    assert "longer than 3 s" in lines[hang.SOPInstanceUID]["error"]
    assert lines[good.SOPInstanceUID]["state"] == "done"
    assert lines[later.SOPInstanceUID]["state"] == "done"
    assert not list((tmp_path / "out.jsonl.inbox").glob("*.dcm"))  # none left to crash a restart


@pytest.mark.issue(42)
def test_listener_a_slow_instance_does_not_hold_the_ones_behind_it(
    make_listener: Any, demo_predictor: Any, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # Before: one decoding worker in arrival order: each instance waited for every slow
    # one ahead of it (twelve real instances delayed by up to 25 minutes).
    import batch.listen.decode_slots
    from batch.read_ahead import decode_failure
    from models.decode_pool import DecodePool

    def troubled_pool(*, workers: int, timeout_s: float | None) -> Any:
        return DecodePool(
            troubled_instance_load, workers=workers, on_error=decode_failure, timeout_s=timeout_s
        )

    monkeypatch.setattr(batch.listen.decode_slots, "decode_pool", troubled_pool)
    listener = make_listener(demo_predictor, file_timeout_s=20.0, decode_slots=2)
    hang = _with_uid(build_dataset(pixels=chest_pixels(64, 64)), "1.2.826.0.1.3680043.10.9.777")
    real = [_reread(build_dataset(pixels=chest_pixels(64, 64))) for _ in range(3)]
    assert _send(listener.port, [hang, *real]) == [0, 0, 0, 0]
    began = time.monotonic()
    written: set[str] = set()
    while not {ds.SOPInstanceUID for ds in real} <= written:
        assert time.monotonic() - began < 15, "the real instances waited for the slow one"
        written = {line["path"] for line in _lines(tmp_path / "out.jsonl")}
        time.sleep(0.05)
    assert hang.SOPInstanceUID not in written  # still decoding in its own slot
    assert listener.wait_idle(60)
    lines = {line["path"]: line for line in _lines(tmp_path / "out.jsonl")}
    assert "longer than 20 s" in lines[hang.SOPInstanceUID]["error"]


def test_listener_allow_list_rejects_other_callers(
    make_listener: Any, demo_predictor: Any, tmp_path: Path
) -> None:
    listener = make_listener(demo_predictor, allow_ae=["ORTHANC"])
    image = _reread(build_dataset(pixels=chest_pixels(64, 64)))
    assert _send(listener.port, [image], ae_title="INTRUDER") == []
    assert _send(listener.port, [image], ae_title="ORTHANC") == [0]
    assert listener.wait_idle(30)
    assert [line["calling_ae"] for line in _lines(tmp_path / "out.jsonl")] == ["ORTHANC"]


def test_listener_processes_its_inbox_after_a_restart(
    demo_predictor: Any, labeler: Any, tmp_path: Path
) -> None:
    image = build_dataset(pixels=chest_pixels(64, 64))
    inbox = tmp_path / "out.jsonl.inbox"
    inbox.mkdir()
    (inbox / f"{image.SOPInstanceUID}.dcm").write_bytes(to_bytes(image))  # left by a crash
    listener = StoreListener(demo_predictor, out=tmp_path / "out.jsonl", labeler=labeler)
    listener.start("127.0.0.1", 0)
    try:
        assert listener.wait_idle(30)
    finally:
        listener.stop()
    [line] = _lines(tmp_path / "out.jsonl")
    assert line["path"] == image.SOPInstanceUID and line["state"] == "done"
    assert not list(inbox.glob("*.dcm"))


def test_listener_forwards_sr_and_gsps_by_stow(
    make_listener: Any, demo_predictor: Any, tmp_path: Path
) -> None:
    stored: list[pydicom.Dataset] = []

    def stow(request: httpx.Request) -> httpx.Response:
        assert request.method == "POST" and request.url.path == "/dicom-web/studies"
        assert request.headers["authorization"].startswith("Bearer ")
        for _, body in parse_multipart(request.headers["content-type"], request.content):
            stored.append(pydicom.dcmread(io.BytesIO(body)))
        refs = [{"00081155": {"vr": "UI", "Value": [d.SOPInstanceUID]}} for d in stored[-2:]]
        return httpx.Response(200, json={"00081199": {"vr": "SQ", "Value": refs}})

    client = DicomwebClient(
        "http://pacs.test/dicom-web", token="t0k", transport=httpx.MockTransport(stow)
    )
    listener = make_listener(demo_predictor, forward=client)
    image = _reread(build_dataset(pixels=chest_pixels(64, 64)))
    assert _send(listener.port, [image]) == [0]
    assert listener.wait_idle(30)
    [line] = _lines(tmp_path / "out.jsonl")
    assert [d.Modality for d in stored] == ["SR", "PR"]
    assert all(d.StudyInstanceUID == image.StudyInstanceUID for d in stored)
    assert line["pushed"] == [d.SOPInstanceUID for d in stored]


def test_listener_limits_and_reports_like_a_batch(
    make_listener: Any, demo_predictor: Any, tmp_path: Path
) -> None:
    from service_fixtures import sr_dataset

    listener = make_listener(demo_predictor, max_pixels=64 * 64)
    big = _reread(build_dataset(pixels=chest_pixels(96, 96)))  # over the pixel limit
    report = _reread(sr_dataset("No effusion.", study_uid=big.StudyInstanceUID, accession="A1"))
    assert _send(listener.port, [big, report]) == [0, 0]
    assert listener.wait_idle(30)
    lines = {line["path"]: line for line in _lines(tmp_path / "out.jsonl")}
    assert lines[big.SOPInstanceUID]["state"] == "failed"
    assert "96x96 = 9,216 pixels" in lines[big.SOPInstanceUID]["error"]
    assert lines[report.SOPInstanceUID]["state"] == "skipped"
    assert "structured report" in lines[report.SOPInstanceUID]["reason"]


def test_listener_does_not_repeat_an_instance_recorded_before_a_restart(
    demo_predictor: Any, labeler: Any, tmp_path: Path
) -> None:
    image = _reread(build_dataset(pixels=chest_pixels(64, 64)))
    for _ in range(2):
        listener = StoreListener(demo_predictor, out=tmp_path / "out.jsonl", labeler=labeler)
        listener.start("127.0.0.1", 0)
        try:
            assert _send(listener.port, [image]) == [0]
            assert listener.wait_idle(30)
        finally:
            listener.stop()
    assert len(_lines(tmp_path / "out.jsonl")) == 1
    assert listener.counts["duplicate"] == 1


@pytest.mark.filterwarnings("ignore:Invalid value for VR UI")  # the point of the test
def test_listener_refuses_an_instance_uid_that_would_escape_the_inbox(
    make_listener: Any, demo_predictor: Any, tmp_path: Path
) -> None:
    listener = make_listener(demo_predictor)
    evil = _reread(build_dataset(pixels=chest_pixels(64, 64)))
    evil.SOPInstanceUID = "1.2/../../../escaped"
    assert _send(listener.port, [evil]) == [0xC000]  # "cannot understand": refused
    assert listener.wait_idle(30)
    assert not list(tmp_path.rglob("escaped*"))
    assert (
        not (tmp_path / "out.jsonl").exists()
        or "escaped" not in (tmp_path / "out.jsonl").read_text()
    )


def test_listener_refuses_a_deflate_bomb_without_inflating_it(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    # pydicom inflates a deflated dataset whole, even to read its header, then parses it:
    # 64 KB of deflated zeros on the wire took 30 s and 0.7 GB in the listener.
    import tracemalloc
    import types
    import zlib

    from dicom_factory import file_meta_bytes
    from pydicom.uid import DeflatedExplicitVRLittleEndian

    compressor = zlib.compressobj(9, zlib.DEFLATED, -zlib.MAX_WBITS)
    bomb = tmp_path / "received.dcm"
    with bomb.open("wb") as f:
        f.write(file_meta_bytes(DeflatedExplicitVRLittleEndian))
        zeros = b"\0" * (1 << 20)
        for _ in range(64):
            f.write(compressor.compress(zeros))
        f.write(compressor.flush())
    assert bomb.stat().st_size < 200_000
    listener = StoreListener(None, out=tmp_path / "out.jsonl", inbox=tmp_path / "inbox")
    requestor = types.SimpleNamespace(ae_title="MODALITY")
    event = types.SimpleNamespace(
        dataset_path=str(bomb), assoc=types.SimpleNamespace(requestor=requestor)
    )
    tracemalloc.start()
    try:
        status = listener._on_store(event)
        _, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    assert status == 0xC000  # cannot understand
    assert peak < 8 << 20
    assert "100-fold" in caplog.text and "deflate bomb" in caplog.text
    assert not list((tmp_path / "inbox").glob("*.dcm"))
