"""`models.j2k_header`: a JPEG 2000 codestream's main header read undecoded, and the
codestreams no radiograph needs refused before any decoder runs (issue 42), on
codestreams made by OpenJPEG and read through `models.dicom.read_dicom`."""

from __future__ import annotations

import time

import numpy as np
import pytest
from dicom_factory import j2k_codestream, j2k_dicom, to_bytes

from models.dicom import read_dicom
from models.errors import ImageTooComplexError, ImageTooLargeError
from models.j2k_header import (
    MAX_LAYERS,
    MAX_LEVELS,
    MAX_TILES,
    check_codestream,
    decode_bytes,
    read_main_header,
)

pytestmark = pytest.mark.issue(42)


def _smooth(side: int) -> np.ndarray:
    return (np.add.outer(np.arange(side), np.arange(side)) * 7 % 4096).astype(np.uint16)


def _noise(side: int) -> np.ndarray:
    return np.random.default_rng(0).integers(0, 65536, (side, side), dtype=np.uint16)


def _with_cod(codestream: bytes, *, layers: int | None = None, levels: int | None = None) -> bytes:
    """The codestream with its COD's layer or level count replaced (nothing else)."""
    data = bytearray(codestream)
    cod = data.find(b"\xff\x52")
    if layers is not None:
        data[cod + 6 : cod + 8] = layers.to_bytes(2, "big")
    if levels is not None:
        data[cod + 9] = levels
    return bytes(data)


def test_main_header_is_read_from_an_openjpeg_codestream() -> None:
    header = read_main_header(j2k_codestream(_smooth(300)[:200], tile_size=(64, 64)))
    assert header is not None
    assert (header.rows, header.columns, header.components) == (200, 300, 1)
    assert header.tiles == 4 * 5 and header.layers == 1 and header.levels == 5
    assert read_main_header(b"\xff\x4f\xff\x51\x00") is None  # cut off
    assert read_main_header(b"not a codestream") is None


@pytest.mark.parametrize(
    ("change", "what"),
    [
        ({"layers": MAX_LAYERS + 1}, "quality layers"),
        ({"levels": MAX_LEVELS + 1}, "decomposition levels"),
    ],
)
def test_a_codestream_with_absurd_layers_or_levels_is_refused_undecoded(
    change: dict[str, int], what: str
) -> None:
    good = j2k_codestream(_smooth(128))
    assert read_dicom(to_bytes(j2k_dicom(good, 128, 128))).pixels.shape == (128, 128)
    bad = to_bytes(j2k_dicom(_with_cod(good, **change), 128, 128))
    with pytest.raises(ImageTooComplexError, match=what):
        read_dicom(bad, name="bad.dcm")


def test_a_codestream_cut_into_tiny_tiles_is_refused_before_decoding() -> None:
    # 2048 x 2048 in 16 x 16 tiles: 16,384 tiles, each with its own decoder bookkeeping.
    tiny = j2k_codestream(_smooth(2048), tile_size=(16, 16))
    data = to_bytes(j2k_dicom(tiny, 2048, 2048))
    start = time.perf_counter()
    with pytest.raises(ImageTooComplexError, match=f"16,384 tiles; at most {MAX_TILES:,}"):
        read_dicom(data, name="tiles.dcm")
    assert time.perf_counter() - start < 1.0
    # The usual tiling of a large image passes.
    usual = read_main_header(j2k_codestream(_smooth(1024), tile_size=(256, 256)))
    assert usual is not None and usual.tiles == 16
    check_codestream("usual.dcm", usual, 0)


def test_decode_memory_is_bounded_by_the_pixel_limit() -> None:
    """16-bit noise hardly compresses and costs the decoder 3.7 bytes per coded byte on top
    of 7.2 per pixel; smooth content of the same size stays within the budget."""
    side = 600
    noise = to_bytes(j2k_dicom(j2k_codestream(_noise(side)), side, side))
    smooth = to_bytes(j2k_dicom(j2k_codestream(_smooth(side)), side, side))
    limit = side * side  # budget 8.5 bytes x 360,000 = 3.1 MB: noise needs 5.4, smooth 2.6
    assert read_dicom(smooth, max_pixels=limit).pixels.shape == (side, side)
    with pytest.raises(ImageTooLargeError, match="JPEG 2000 image .* would need about"):
        read_dicom(noise, name="noise.dcm", max_pixels=limit)
    assert read_dicom(noise, max_pixels=None).pixels.shape == (side, side)  # no limit: decoded
    header = read_main_header(j2k_codestream(_smooth(side)))
    assert header is not None and decode_bytes(header, 0) == int(7.2 * side * side)
