"""`models.stored_pixels`: the per-code grey map gives what the per-pixel path gave, and the
fit into the model input matches `fit_square` on that float image."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
from dicom_factory import build_dataset, write

from models.dicom import _to_unit_grey, read_dicom, read_dicom_stored
from models.geometry import Geometry
from models.stored_pixels import UNIT_CODES, StoredPixels
from models.transforms import fit_square

CASES = {
    "plain": {},
    "window that clips": {"WindowCenter": 1800, "WindowWidth": 1200},
    "wide window (affine)": {"WindowCenter": 2048, "WindowWidth": 9000},
    "rescale and window": {
        "RescaleSlope": 0.5,
        "RescaleIntercept": -100,
        "WindowCenter": 700,
        "WindowWidth": 900,
    },  # fmt: skip
    "monochrome1": {"PhotometricInterpretation": "MONOCHROME1"},
}


def _pixels(rows: int = 300, columns: int = 250, seed: int = 0) -> np.ndarray:
    rng = np.random.default_rng(seed)
    smooth = np.add.outer(np.linspace(0, 3000, rows), np.linspace(0, 900, columns))
    return (smooth + rng.integers(0, 200, (rows, columns))).astype(np.uint16)


@pytest.mark.parametrize("case", sorted(CASES))
def test_read_dicom_equals_the_per_pixel_path_bit_for_bit(tmp_path: Path, case: str) -> None:
    path = write(build_dataset(_pixels(), **CASES[case]), tmp_path / "a.dcm")
    import pydicom

    ds = pydicom.dcmread(path)
    photometric = str(ds.PhotometricInterpretation)
    expected = _to_unit_grey("a", ds, ds.pixel_array, photometric)
    assert np.array_equal(read_dicom(path).pixels, expected)


@pytest.mark.parametrize("case", sorted(CASES))
@pytest.mark.parametrize("size", [64, 512])  # shrinking (area) and enlarging (linear)
def test_fit_matches_fit_square_of_the_float_image(tmp_path: Path, case: str, size: int) -> None:
    path = write(build_dataset(_pixels(), **CASES[case]), tmp_path / "a.dcm")
    stored, meta = read_dicom_stored(path)
    fitted, geo = stored.fit(size, "letterbox")
    assert geo == Geometry.fit(meta.rows, meta.columns, size, "letterbox")
    assert fitted.dtype == np.uint16 and fitted.shape == (geo.height, geo.width)
    reference = fit_square(read_dicom(path).pixels, size, "letterbox")[0]
    inside = reference[geo.top : geo.top + geo.height, geo.left : geo.left + geo.width]
    assert np.abs(fitted / UNIT_CODES - inside).max() < 2e-5  # 16-bit quantization


def test_affine_path_is_taken_only_when_the_map_is_affine() -> None:
    codes = np.arange(100, 200, dtype=np.uint16).reshape(10, 10)
    assert StoredPixels.linear(codes, 100, 199)._affine() is not None
    clipped = StoredPixels.from_codes(codes, lambda c: np.clip(c.astype(float), 120, 180))
    assert clipped._affine() is None


def test_non_monotonic_map_scales_by_the_codes_present() -> None:
    codes = np.array([[0, 2], [2, 0]], dtype=np.uint16)  # code 1 absent: its value is ignored
    stored = StoredPixels.from_codes(codes, lambda c: np.array([[0.0, 100.0, 10.0]]))
    assert (stored.low, stored.high) == (0.0, 10.0)
    assert np.array_equal(stored.unit(), np.array([[0, 1], [1, 0]], np.float32))


def test_signed_codes_index_the_table_through_their_unsigned_view() -> None:
    codes = np.array([[-5, 0], [3, -5]], dtype=np.int16)
    stored = StoredPixels.from_codes(codes, lambda c: c.astype(float) * 2)
    assert np.allclose(stored.unit(), (codes.astype(float) + 5) / 8)


def test_integer_dicom_for_training_is_the_float_image_in_16_bits(tmp_path: Path) -> None:
    from models.images import load_integer_image

    path = write(build_dataset(_pixels(), **CASES["window that clips"]), tmp_path / "a.dcm")
    image = load_integer_image(path)
    assert image.pixels.dtype == np.uint16 and (image.low, image.high) == (0.0, 65535.0)
    assert np.abs(image.pixels / UNIT_CODES - read_dicom(path).pixels).max() <= 0.5 / UNIT_CODES
