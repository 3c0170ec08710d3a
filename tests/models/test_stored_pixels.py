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


def test_clamped_affine_path_is_taken_only_when_the_map_is_a_clamped_line() -> None:
    codes = np.arange(100, 200, dtype=np.uint16).reshape(10, 10)
    assert StoredPixels.linear(codes, 100, 199)._clamped_affine() == (1.0, 0.0, -np.inf, np.inf)
    # A window: flat below 120 and above 180, the line between; the clamp sits in code space.
    clipped = StoredPixels.from_codes(codes, lambda c: np.clip(c.astype(float) * 2, 240, 360))
    assert clipped._clamped_affine() == pytest.approx((2.0, 0.0, 120.0, 180.0))
    # Falling (an inverted LUT) works the same way.
    falling = StoredPixels.from_codes(codes, lambda c: np.clip(500 - c.astype(float), 330, 370))
    assert falling._clamped_affine() == pytest.approx((-1.0, 500.0, 130.0, 170.0))
    # A curve (a sigmoid VOI function, a gamma LUT) is no line: the table is used instead.
    curved = StoredPixels.from_codes(codes, lambda c: np.sqrt(c.astype(float)))
    assert curved._clamped_affine() is None
    step = StoredPixels.from_codes(codes, lambda c: (c >= 150).astype(float))
    assert step._clamped_affine() is None


def test_sigmoid_voi_function_fits_like_the_float_image(tmp_path: Path) -> None:
    ds = build_dataset(_pixels(), WindowCenter=1800, WindowWidth=1200, VOILUTFunction="SIGMOID")
    path = write(ds, tmp_path / "a.dcm")
    stored, _ = read_dicom_stored(path)
    assert stored._clamped_affine() is None
    fitted, geo = stored.fit(64, "letterbox")
    reference = fit_square(read_dicom(path).pixels, 64, "letterbox")[0]
    inside = reference[geo.top : geo.top + geo.height, geo.left : geo.left + geo.width]
    assert np.abs(fitted / UNIT_CODES - inside).max() < 2e-5


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


@pytest.mark.parametrize(
    ("bits", "stored", "syntax"),
    [(16, 12, "1.2.840.10008.1.2.1"), (16, 16, "1.2.840.10008.1.2"), (8, 8, "1.2.840.10008.1.2.1"),
     (8, 6, "1.2.840.10008.1.2")],
)  # fmt: skip
def test_native_pixels_are_what_pydicom_decodes(
    tmp_path: Path, bits: int, stored: int, syntax: str
) -> None:
    """The direct read of uncompressed pixel data clears the unused high bits as pydicom
    does (garbage above Bits Stored is common in 12-bit CR)."""
    import pydicom
    from pydicom.uid import UID

    from models.dicom import _native_grey

    rng = np.random.default_rng(1)
    dtype = np.uint16 if bits == 16 else np.uint8
    raw = rng.integers(0, 1 << bits, (37, 23)).astype(dtype)  # high bits set at random
    ds = build_dataset(raw, bits=bits, BitsStored=stored, HighBit=stored - 1)
    ds.file_meta.TransferSyntaxUID = UID(syntax)
    path = write(ds, tmp_path / "a.dcm")
    ds = pydicom.dcmread(path)
    fast = _native_grey(ds)
    assert fast is not None
    assert fast.dtype == ds.pixel_array.dtype and np.array_equal(fast, ds.pixel_array)
    assert int(fast.max()) < 1 << stored
    # Clean high bits (the usual case): the file's bytes themselves, never written to.
    clean = build_dataset(
        raw & ((1 << stored) - 1), bits=bits, BitsStored=stored, HighBit=stored - 1
    )
    clean.file_meta.TransferSyntaxUID = UID(syntax)
    view = _native_grey(pydicom.dcmread(write(clean, tmp_path / "b.dcm")))
    assert view is not None and not view.flags.writeable
    assert np.array_equal(view, raw & ((1 << stored) - 1))


def test_other_pixel_data_is_left_to_pydicom(tmp_path: Path) -> None:
    import pydicom

    from models.dicom import _native_grey

    pixels = np.arange(12, dtype=np.uint16).reshape(3, 4)
    signed = pydicom.dcmread(write(build_dataset(pixels, PixelRepresentation=1), tmp_path / "s"))
    assert _native_grey(signed) is None
    short = build_dataset(pixels)
    short.PixelData = short.PixelData[:10]  # truncated: pydicom's decoder names the problem
    assert _native_grey(short) is None
    odd_high_bit = build_dataset(pixels, BitsStored=12, HighBit=15)
    assert _native_grey(odd_high_bit) is None
