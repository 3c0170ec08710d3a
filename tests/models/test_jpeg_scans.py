"""JPEG scan bombs refused before decoding, for uploads and DICOM frames (issue 42 H2).

Before: a progressive JPEG whose last scan is repeated thousands of times decoded for
seconds to minutes (a pass over the whole image per scan), as a bitmap or as a DICOM
frame; nothing looked at the number of scans.
"""

from __future__ import annotations

import io
import time

import numpy as np
import pytest
from dicom_factory import jpeg_dicom, scan_bomb_jpeg, to_bytes
from PIL import Image

from models.dicom import read_dicom
from models.errors import ImageTooComplexError, ImageTooLargeError
from models.images import load_image, load_integer_image
from models.jpeg_scans import MAX_SCANS_PER_FRAME, check_scans, count_scans

pytestmark = pytest.mark.issue(42)


def _jpeg(mode: str, **options: object) -> bytes:
    rng = np.random.default_rng(0)
    shape = (96, 128, 3) if mode == "RGB" else (96, 128)
    buffer = io.BytesIO()
    Image.fromarray(rng.integers(0, 255, shape, dtype=np.uint8), mode).save(
        buffer, "JPEG", **options
    )
    return buffer.getvalue()


@pytest.fixture(scope="module")
def bomb() -> bytes:
    return scan_bomb_jpeg(side=1024, repeats=3000)


def test_count_scans_counts_what_encoders_write() -> None:
    assert count_scans(_jpeg("L")) == 1
    assert count_scans(_jpeg("L", progressive=True)) == 6  # libjpeg's grey script
    assert count_scans(_jpeg("RGB", progressive=True)) == 10  # and its colour one
    # Marker-like bytes inside a segment (a comment) are skipped by its length.
    commented = _jpeg("L", comment=b"\xff\xda" * 50)
    assert count_scans(commented) == 1
    assert count_scans(b"") == 0 and count_scans(_jpeg("L")[:300]) == 0  # truncated


def test_count_scans_stops_once_past_the_limit(bomb: bytes) -> None:
    assert count_scans(bomb) > 3000
    assert count_scans(bomb, stop_after=10) == 11


def test_check_scans_allows_the_limit_per_frame(bomb: bytes) -> None:
    with pytest.raises(ImageTooComplexError, match=r"more than 100 scans.*decode-time bomb"):
        check_scans("bomb.jpg", bomb)
    check_scans("bomb.jpg", bomb, frames=40)  # 4,000 scans over 40 frames: plausible
    assert issubclass(ImageTooComplexError, ImageTooLargeError)  # 413 at the service
    assert MAX_SCANS_PER_FRAME >= 10


def test_load_image_refuses_a_scan_bomb_before_decoding(bomb: bytes) -> None:
    start = time.perf_counter()
    with pytest.raises(ImageTooComplexError, match="bomb.jpg"):
        load_image(bomb, filename="bomb.jpg")
    with pytest.raises(ImageTooComplexError):
        load_integer_image(bomb, filename="bomb.jpg")
    assert time.perf_counter() - start < 0.5
    # A progressive JPEG as encoders write it decodes.
    assert load_image(_jpeg("L", progressive=True), filename="ok.jpg").pixels.shape == (96, 128)


def test_read_dicom_refuses_a_scan_bomb_frame_before_decoding(bomb: bytes) -> None:
    data = to_bytes(jpeg_dicom(bomb, 1024, 1024))
    start = time.perf_counter()
    with pytest.raises(ImageTooComplexError, match="more than 100 scans"):
        read_dicom(data)
    assert time.perf_counter() - start < 0.5
    plain = to_bytes(jpeg_dicom(_jpeg("L", progressive=True), 96, 128))
    assert read_dicom(plain).pixels.shape == (96, 128)
