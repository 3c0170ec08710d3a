"""Image input limits and hostile DICOMs through HTTP (issue 7 items 2, 3, 5)."""

from __future__ import annotations

import io
import json
import time
import tracemalloc
from collections.abc import Callable
from pathlib import Path

import numpy as np
import pytest
from dicom_factory import j2k_codestream, j2k_dicom, jpeg_dicom, scan_bomb_jpeg
from fastapi.testclient import TestClient
from pydicom.dataset import Dataset
from pydicom.encaps import encapsulate
from pydicom.sequence import Sequence as DicomSequence
from pydicom.uid import DeflatedExplicitVRLittleEndian, JPEGBaseline8Bit
from service_fixtures import build_dataset, chest_pixels, dx_bytes, to_bytes, wait_for_job

from app.settings import Settings

DICOM = {"Content-Type": "application/dicom"}


@pytest.fixture(scope="module")
def huge_jpeg_dicom() -> bytes:
    """A valid 10000x10000 JPEG baseline DICOM: about 1.2 MB, 100 megapixels decoded."""
    from PIL import Image

    buf = io.BytesIO()
    Image.new("L", (10_000, 10_000), 128).save(buf, format="JPEG", quality=75)
    ds = build_dataset()
    ds.file_meta.TransferSyntaxUID = JPEGBaseline8Bit
    ds.Rows = ds.Columns = 10_000
    ds.SamplesPerPixel = 1
    ds.PhotometricInterpretation = "MONOCHROME2"
    ds.BitsAllocated = ds.BitsStored = 8
    ds.HighBit = 7
    ds.PixelRepresentation = 0
    ds.PixelData = encapsulate([buf.getvalue()])
    ds["PixelData"].VR = "OB"
    return to_bytes(ds)


@pytest.mark.issue(7)
def test_predict_image_over_max_pixels_is_413_before_decoding(
    client: TestClient, huge_jpeg_dicom: bytes
) -> None:
    assert len(huge_jpeg_dicom) < 2 * 2**20  # well within CXR_MAX_UPLOAD_MB
    tracemalloc.start()
    try:
        start = time.perf_counter()
        response = client.post("/v1/images/predict", content=huge_jpeg_dicom, headers=DICOM)
        took = time.perf_counter() - start
        _, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    assert response.status_code == 413
    body = response.json()
    assert body["error"] == "ImageTooLargeError"
    assert "10000x10000 = 100,000,000 pixels" in body["detail"]
    assert "limit is 50,000,000 pixels" in body["detail"]
    # Decoding would allocate 100 MB (uint8) then 400 MB (float32); refused from the header.
    assert peak < 40 * 2**20, f"peak traced memory {peak / 2**20:.0f} MiB: pixels were decoded"
    assert took < 5.0


@pytest.mark.issue(7)
def test_max_pixels_setting_is_applied_and_can_be_lifted(
    make_client: Callable[..., TestClient],
) -> None:
    small = make_client(max_pixels=4000)  # the 64x64 test image has 4096
    response = small.post("/v1/images/predict", content=dx_bytes(), headers=DICOM)
    assert response.status_code == 413
    assert "64x64 = 4,096 pixels; the limit is 4,000" in response.json()["detail"]
    assert Settings(max_pixels="").max_pixels is None  # CXR_MAX_PIXELS= means no limit
    assert Settings().max_pixels == 50_000_000


@pytest.mark.issue(7)
def test_max_pixels_from_environment(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("CXR_MAX_PIXELS", "12000000")
    assert Settings().max_pixels == 12_000_000


def _corrupt_deflate() -> bytes:
    ds = build_dataset(pixels=chest_pixels())
    ds.file_meta.TransferSyntaxUID = DeflatedExplicitVRLittleEndian
    data = to_bytes(ds)
    meta_end = 144 + int.from_bytes(data[140:144], "little")
    garbage = np.random.default_rng(0).integers(0, 256, 2048, dtype=np.uint8).tobytes()
    return data[:meta_end] + garbage


def _voi_lut_zero_bits() -> bytes:
    ds = build_dataset(pixels=chest_pixels())
    item = Dataset()
    item.add_new(0x00283002, "US", [256, 0, 0])
    item.add_new(0x00283006, "US", list(range(256)))
    ds.VOILUTSequence = DicomSequence([item])
    return to_bytes(ds)


def _rows_with_two_values() -> bytes:
    return to_bytes(build_dataset(pixels=chest_pixels(), Rows=[64, 64]))


@pytest.mark.issue(7)
@pytest.mark.parametrize(
    ("build", "message"),
    [
        (_corrupt_deflate, "deflate-compressed data is corrupt"),
        (_voi_lut_zero_bits, "gives 0 bits per entry"),
        (_rows_with_two_values, r"Rows (0028,0010) holds 2 values"),
    ],
)
def test_predict_poisoned_dicom_is_422_json_not_500(
    make_client: Callable[..., TestClient], build: Callable[[], bytes], message: str
) -> None:
    client = make_client(raise_errors=False)
    response = client.post("/v1/images/predict", content=build(), headers=DICOM)
    assert response.status_code == 422, response.text
    body = response.json()
    assert body["error"] == "InvalidDicomError"
    assert message in body["detail"]


@pytest.mark.issue(7)
def test_batch_job_fails_images_over_max_pixels_and_poisoned_files_with_reasons(
    make_client: Callable[..., TestClient], tmp_path: Path
) -> None:
    export = tmp_path / "roots" / "export"
    export.mkdir(parents=True)
    (export / "good.dcm").write_bytes(dx_bytes())
    (export / "wide.dcm").write_bytes(dx_bytes(pixels=chest_pixels(64, 128)))
    (export / "deflate.dcm").write_bytes(_corrupt_deflate())
    (export / "voi.dcm").write_bytes(_voi_lut_zero_bits())
    (export / "rows.dcm").write_bytes(_rows_with_two_values())
    client = make_client(model=False, batch_roots=[tmp_path / "roots"], max_pixels=5000)
    response = client.post("/v1/batches", json={"path": "export"})
    assert response.status_code == 202, response.text
    job_id = response.json()["id"]
    assert wait_for_job(client, job_id)["state"] == "done"
    lines = client.get(f"/v1/batches/{job_id}/results").text.splitlines()
    by_path = {r["path"]: r for r in map(json.loads, lines)}
    assert by_path["good.dcm"]["state"] == "done"
    assert "64x128 = 8,192 pixels; the limit is 5,000" in by_path["wide.dcm"]["error"]
    assert "deflate" in by_path["deflate.dcm"]["error"]
    assert "0 bits per entry" in by_path["voi.dcm"]["error"]
    assert "holds 2 values" in by_path["rows.dcm"]["error"]


@pytest.mark.issue(7)
def test_cli_batch_max_pixels_fails_large_images_with_reason(tmp_path: Path) -> None:
    from app.cli import main

    export = tmp_path / "export"
    export.mkdir()
    (export / "good.dcm").write_bytes(dx_bytes())
    (export / "wide.dcm").write_bytes(dx_bytes(pixels=chest_pixels(64, 128)))
    out = tmp_path / "out.jsonl"
    assert main(["batch", str(export), "-o", str(out), "--max-pixels", "5000"]) == 1
    by_path = {r["path"]: r for r in map(json.loads, out.read_text().splitlines())}
    assert by_path["good.dcm"]["state"] == "done"
    assert by_path["wide.dcm"]["state"] == "failed"
    assert "64x128 = 8,192 pixels; the limit is 5,000" in by_path["wide.dcm"]["error"]
    assert main(["batch", str(export), "-o", str(out), "--max-pixels", "0"]) == 0


@pytest.mark.issue(42)
def test_predict_refuses_a_jpeg_scan_bomb_before_decoding(client: TestClient) -> None:
    # Before: 57 KB decoded for 7-14 s (a pass over the image per repeated scan), and 50
    # of them held image prediction for 25 minutes.
    bomb = scan_bomb_jpeg(side=2048, repeats=3000)
    for body, headers in (
        (bomb, {"Content-Type": "image/jpeg"}),
        (to_bytes(jpeg_dicom(bomb, 2048, 2048)), DICOM),
    ):
        start = time.perf_counter()
        response = client.post("/v1/images/predict", content=body, headers=headers)
        assert response.status_code == 413, response.text
        assert response.json()["error"] == "ImageTooComplexError"
        assert "decode-time bomb" in response.json()["detail"]
        assert time.perf_counter() - start < 2.0


@pytest.mark.issue(42)
def test_predict_refuses_a_jpeg_2000_codestream_of_tiny_tiles_before_decoding(
    client: TestClient,
) -> None:
    pixels = (np.add.outer(np.arange(2048), np.arange(2048)) % 4096).astype(np.uint16)
    body = to_bytes(j2k_dicom(j2k_codestream(pixels, tile_size=(16, 16)), 2048, 2048))
    start = time.perf_counter()
    response = client.post("/v1/images/predict", content=body, headers=DICOM)
    assert response.status_code == 413, response.text
    assert response.json()["error"] == "ImageTooComplexError"
    assert "16,384 tiles" in response.json()["detail"]
    assert time.perf_counter() - start < 2.0
