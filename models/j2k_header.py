"""Read a JPEG 2000 codestream's main header, undecoded, and refuse what no radiograph needs.

Two costs of a JPEG 2000 decode are set by the codestream, not by the image's size alone:

- Memory. OpenJPEG holds every sample as 32 bits while it decodes, and copies the coded
  data into its code-blocks: a decode in the service's worker peaked at about 7.2 bytes
  per sample plus 3.7 times the codestream's size (the dataset's copy, the frame pydicom
  hands over, the decoder's segments; `python benchmarks/predict_memory.py --cases j2k16
  j2knoise`). Smooth 16-bit content compresses to a few percent and costs about 7.9
  bytes a pixel; 12-bit noise hardly compresses (1.6 bytes a pixel) and costs 13, at the
  default pixel limit (50 megapixels) about 660 MB where the other encodings stay within
  about 6 bytes a pixel (300 MB). `check_codestream` refuses a codestream whose estimate
  (`decode_bytes`) exceeds `BYTES_PER_PIXEL_BUDGET` bytes per pixel of the pixel limit
  (425 MB at 50 megapixels): any smooth image up to the limit, a radiograph coded at one
  byte a pixel up to 39 megapixels, noise up to 32.
- Structure. The number of tiles, quality layers and decomposition levels multiplies the
  decoder's bookkeeping (tiles, precincts, packets) whatever the image: the standard
  allows 65,535 tiles and layers and 32 levels; a radiograph uses one tile or a few
  hundred, a few layers and at most about a dozen levels. Past `MAX_TILES`, `MAX_LAYERS`
  or `MAX_LEVELS` the codestream is refused before decoding (`ImageTooComplexError`, the
  service's 413), as `models.jpeg_scans` refuses a JPEG whose scans repeat.

Everything else a slow codestream can do is bounded by the pixel limit (the decoder's
work is at most a few passes per bit plane per sample) and, in the service, by the decode
time limit and the cancellation of a decode whose client has gone.
"""

from __future__ import annotations

from dataclasses import dataclass

from models.errors import ImageTooComplexError, ImageTooLargeError

__all__ = [
    "BYTES_PER_PIXEL_BUDGET",
    "MAX_LAYERS",
    "MAX_LEVELS",
    "MAX_TILES",
    "MainHeader",
    "check_codestream",
    "decode_bytes",
    "read_main_header",
]

MAX_TILES = 4096  # a 50-megapixel image cut into 128 x 128 tiles has about 3,000
MAX_LAYERS = 256  # encoders write one, or a handful for progressive quality
MAX_LEVELS = 16  # 2^16 is beyond any side the readers accept (`MAX_DIMENSION`)
# JPEG 2000 decode memory, per pixel of the pixel limit (other encodings: about 6;
# docs/security/server.md).
BYTES_PER_PIXEL_BUDGET = 8.5
# The decode's measured cost in a decoding worker: bytes per sample, and per coded byte.
_PER_SAMPLE = 7.2
_PER_CODED_BYTE = 3.7

_SOC_SIZ = b"\xff\x4f\xff\x51"
_SIZ, _COD, _COC, _SOT, _SOD, _EOC = 0x51, 0x52, 0x53, 0x90, 0x93, 0xD9


@dataclass(frozen=True)
class MainHeader:
    """What the main header says (ISO/IEC 15444-1 A.5, A.6).

    Attributes:
        rows, columns: the image area (Ysiz - YOsiz, Xsiz - XOsiz).
        components: Csiz.
        tiles: tiles covering the image area.
        layers: quality layers (COD).
        levels: the most decomposition levels in COD or any COC.
    """

    rows: int
    columns: int
    components: int
    tiles: int
    layers: int
    levels: int


def _u(data: bytes, at: int, size: int) -> int:
    return int.from_bytes(data[at : at + size], "big")


def read_main_header(data: bytes) -> MainHeader | None:
    """The main header of a codestream (a JP2 wrapper's first 4 KiB are searched for it);
    None when SIZ or COD is missing or cut off."""
    start = data.find(_SOC_SIZ, 0, 4096)
    if start < 0:
        return None
    pos = start + 2
    siz: tuple[int, int, int, int] | None = None  # rows, columns, components, tiles
    layers = levels = -1
    while pos + 4 <= len(data):
        if data[pos] != 0xFF:
            return None
        marker = data[pos + 1]
        if marker in (_SOT, _SOD, _EOC):
            break
        length = _u(data, pos + 2, 2)
        body = data[pos + 4 : pos + 2 + length]
        if length < 2 or len(body) < length - 2:
            return None
        if marker == _SIZ and len(body) >= 36:
            x, y, x0, y0, xt, yt, xt0, yt0 = (_u(body, 2 + 4 * k, 4) for k in range(8))
            components = _u(body, 34, 2)
            if x <= x0 or y <= y0 or xt == 0 or yt == 0 or xt0 > x0 or yt0 > y0:
                return None
            tiles = -(-(x - xt0) // xt) * -(-(y - yt0) // yt)
            siz = (y - y0, x - x0, components, tiles)
        elif marker == _COD and len(body) >= 6:
            layers = _u(body, 2, 2)
            levels = max(levels, body[5])
        elif marker == _COC and siz is not None:
            at = 1 + (2 if siz[2] >= 257 else 1)  # Ccoc, then Scoc, then the level count
            if len(body) > at:
                levels = max(levels, body[at])
        pos += 2 + length
    if siz is None or layers < 0:
        return None
    rows, columns, components, tiles = siz
    return MainHeader(rows, columns, components, tiles, layers, levels)


def decode_bytes(header: MainHeader, coded_bytes: int) -> int:
    """Estimated peak memory of decoding the codestream (bytes above idle)."""
    samples = header.rows * header.columns * max(1, header.components)
    return int(_PER_SAMPLE * samples + _PER_CODED_BYTE * coded_bytes)


def check_codestream(
    name: str, header: MainHeader, coded_bytes: int, max_pixels: int | None = None
) -> None:
    """Refuse a codestream before decoding when its structure or memory is implausible.

    Args:
        name: the input, for messages.
        header: from `read_main_header`.
        coded_bytes: the codestream's size (all fragments of the frame).
        max_pixels: the pixel limit the caller applies (None: no memory check).

    Raises:
        ImageTooComplexError: more than `MAX_TILES` tiles, `MAX_LAYERS` layers or
            `MAX_LEVELS` decomposition levels.
        ImageTooLargeError: its estimated decode memory is above `BYTES_PER_PIXEL_BUDGET`
            bytes per pixel of `max_pixels`.
    """
    for what, value, most in (
        ("tiles", header.tiles, MAX_TILES),
        ("quality layers", header.layers, MAX_LAYERS),
        ("decomposition levels", header.levels, MAX_LEVELS),
    ):
        if value > most:
            raise ImageTooComplexError(
                f"{name}: the JPEG 2000 codestream has {value:,} {what}; at most {most:,} "
                "are accepted (no radiograph needs more). Re-encode it with the usual "
                "settings or send it uncompressed."
            )
    if max_pixels is None:
        return
    needed = decode_bytes(header, coded_bytes)
    budget = int(BYTES_PER_PIXEL_BUDGET * max_pixels)
    if needed > budget:
        raise ImageTooLargeError(
            f"{name}: decoding this {header.rows}x{header.columns} JPEG 2000 image "
            f"({coded_bytes:,} bytes coded) would need about {needed / 2**20:,.0f} MiB; the "
            f"limit is {budget / 2**20:,.0f} MiB ({BYTES_PER_PIXEL_BUDGET:g} bytes a pixel of "
            f"the {max_pixels:,}-pixel limit). Send it uncompressed or downsampled."
        )
