"""batch.scan.classify_file: an image instance cut before its Pixel Data is a truncated file
(`invalid`, so the job fails it), while objects that never hold pixels are still skipped."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from dicom_factory import (
    BASIC_TEXT_SR,
    CR_STORAGE,
    DX_STORAGE,
    GSPS_STORAGE,
    build_dataset,
    chest_pixels,
    to_bytes,
)

from batch.scan import classify_file

PIXEL_DATA_TAG = b"\xe0\x7f\x10\x00"  # (7FE0,0010), little endian
KOS_STORAGE = "1.2.840.10008.5.1.4.1.1.88.59"
PDF_STORAGE = "1.2.840.10008.5.1.4.1.1.104.1"


def _cr_bytes() -> bytes:
    ds = build_dataset(
        pixels=chest_pixels(), modality="CR", sop_class=CR_STORAGE, study_uid="1.2.3.4"
    )
    return to_bytes(ds)


def _classify(tmp_path: Path, data: bytes, name: str = "IM0001") -> tuple[str, str | None]:
    path = tmp_path / name
    path.write_bytes(data)
    item = classify_file(path, name)
    return item.kind, item.note


def test_classify_file_cr_cut_before_its_pixel_data_is_invalid(tmp_path: Path) -> None:
    data = _cr_bytes()
    assert data.find(PIXEL_DATA_TAG) > 600  # the first 600 bytes end inside the header
    path = tmp_path / "IM0001"
    path.write_bytes(data[:600])
    item = classify_file(path, "IM0001")
    assert item.kind == "invalid"
    assert item.note is not None and item.note.startswith("truncated: no pixel data")
    assert "Computed Radiography Image Storage" in item.note and CR_STORAGE in item.note
    assert str(tmp_path) not in item.note
    assert item.study_instance_uid == "1.2.3.4"


def test_classify_file_cut_exactly_at_the_pixel_data_tag_is_invalid(tmp_path: Path) -> None:
    data = _cr_bytes()
    kind, note = _classify(tmp_path, data[: data.find(PIXEL_DATA_TAG)])
    assert kind == "invalid" and note is not None and note.startswith("truncated")


@pytest.mark.parametrize(
    ("modality", "sop_class"),
    [
        ("CR", CR_STORAGE),
        ("DX", DX_STORAGE),
        ("DX", "1.2.840.10008.5.1.4.1.1.1.1.1"),  # DX, for processing
        ("MG", "1.2.840.10008.5.1.4.1.1.1.2"),  # digital mammography, for presentation
        ("OT", "1.2.840.10008.5.1.4.1.1.7"),  # secondary capture
        ("CT", "1.2.840.10008.5.1.4.1.1.2"),
    ],
)
def test_classify_file_image_storage_class_without_pixel_data_is_invalid(
    tmp_path: Path, modality: str, sop_class: str
) -> None:
    kind, note = _classify(
        tmp_path, to_bytes(build_dataset(modality=modality, sop_class=sop_class))
    )
    assert kind == "invalid" and note is not None and note.startswith("truncated: no pixel data")


@pytest.mark.parametrize(
    ("modality", "sop_class", "expected"),
    [
        ("PR", GSPS_STORAGE, "other"),
        ("DOC", PDF_STORAGE, "other"),
        ("CR", "1.2.826.0.1.3680043.9.9999.1", "other"),  # a private class: not known as image
        ("SR", BASIC_TEXT_SR, "sr"),
        ("KO", KOS_STORAGE, "sr"),  # an SR-family document, handled (and skipped) as one
    ],
)
def test_classify_file_objects_without_pixels_by_design_are_not_failed(
    tmp_path: Path, modality: str, sop_class: str, expected: str
) -> None:
    kind, note = _classify(
        tmp_path, to_bytes(build_dataset(modality=modality, sop_class=sop_class))
    )
    assert kind == expected
    if expected == "other":
        assert note == f"no pixel data (SOP Class {sop_class})"


def test_classify_file_cut_before_its_sop_class_is_invalid(tmp_path: Path) -> None:
    # A Part 10 file whose meta does not name the class, cut before (0008,0016): it was
    # "other" (skipped) as if it were an object of another kind.
    from pydicom.dataset import Dataset, FileMetaDataset
    from pydicom.filebase import DicomBytesIO
    from pydicom.filewriter import write_dataset, write_file_meta_info

    meta = FileMetaDataset()
    meta.TransferSyntaxUID = "1.2.840.10008.1.2.1"
    meta.MediaStorageSOPInstanceUID = "1.2.3"
    head, body = DicomBytesIO(), DicomBytesIO()
    for buf in (head, body):
        buf.is_little_endian, buf.is_implicit_VR = True, False
    write_file_meta_info(head, meta, enforce_standard=False)
    ds = Dataset()
    ds.SpecificCharacterSet = "ISO_IR 100"
    ds.ImageType = ["ORIGINAL", "PRIMARY"]
    write_dataset(body, ds)
    kind, note = _classify(tmp_path, b"\0" * 128 + b"DICM" + head.getvalue() + body.getvalue())
    assert kind == "invalid" and note is not None and "no SOP Class UID" in note


def test_classify_file_complete_cr_is_an_image(tmp_path: Path) -> None:
    assert _classify(tmp_path, _cr_bytes()) == ("image", None)


def test_cli_batch_counts_a_truncated_image_as_failed_and_rejects_it(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    from app.cli import main

    export = tmp_path / "export"
    export.mkdir()
    data = _cr_bytes()
    (export / "IM0001").write_bytes(data[: data.find(PIXEL_DATA_TAG)])
    (export / "IM0002").write_bytes(data)
    (export / "PS0001").write_bytes(to_bytes(build_dataset(modality="PR", sop_class=GSPS_STORAGE)))
    out = tmp_path / "out.jsonl"
    assert main(["batch", str(export), "-o", str(out)]) == 1
    assert "3 files: 1 done, 1 skipped, 1 failed" in capsys.readouterr().err
    rejects = (tmp_path / "out.rejects.jsonl").read_text().splitlines()
    assert [json.loads(line)["path"] for line in rejects] == ["IM0001"]
    assert json.loads(rejects[0])["error"].startswith("truncated: no pixel data")
