"""Load any supported image (DICOM, PNG, JPEG, TIFF) as a grey float array in [0, 1].

The NIH ChestX-ray14 release is PNG (some files RGBA-encoded grey), PACS exports
are DICOM: both come out as the same `DicomImage` so the model sees one format.
"""

from __future__ import annotations

import io
import os
import warnings
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, BinaryIO

import numpy as np

from models.dicom import DicomImage, ImageMeta, check_dimensions, read_dicom, reading
from models.errors import (
    CorruptImageError,
    ImageError,
    ImageTooLargeError,
    InvalidDicomError,
    UnsupportedImageError,
)
from models.jpeg_scans import check_scans

if TYPE_CHECKING:
    from PIL import Image

__all__ = ["IntegerImage", "load_image", "load_integer_image", "looks_like_dicom", "read_bitmap"]

_BITMAP_FORMATS = frozenset({"PNG", "JPEG", "TIFF", "BMP"})


def load_image(
    source: str | os.PathLike[str] | bytes | BinaryIO,
    *,
    filename: str | None = None,
    max_pixels: int | None = None,
) -> DicomImage:
    """Read a DICOM or bitmap image.

    DICOM is recognised by the 'DICM' marker at byte 128 (or, failing a bitmap decode, by
    parsing); anything else goes through Pillow. Whatever a decoder raises comes out as an
    `ImageError` subclass naming the input. A path or a stream is read by the decoder
    itself, never copied whole into memory first (issue 18 item 13).

    Args:
        source: a path, the file's bytes, or a seekable binary stream (read from its
            current position).
        filename: name used in error messages when `source` is bytes or a stream.
        max_pixels: refuse an image of more than this many pixels, read from its header
            before any pixel is decoded (`ImageTooLargeError`); None: only the per-side limit.

    Returns:
        `DicomImage`: pixels float32 (rows, columns) in [0, 1]; for bitmaps `meta` has only
        rows, columns, bits_stored and photometric set.

    Raises:
        ImageError: (a subclass) the input is unreadable, unsupported or too large.
    """
    if isinstance(source, bytes):
        return _load(source, filename or "<bytes>", source[:132], len(source), max_pixels)
    name = filename or (str(source) if isinstance(source, str | os.PathLike) else "<stream>")
    stream = _open_stream(source, name)
    try:
        start = stream.tell()
        try:
            head = stream.read(132)
            size = stream.seek(0, io.SEEK_END) - start
            stream.seek(start)
        except OSError as exc:
            raise ImageError(f"{name}: cannot read file ({exc.strerror or exc})") from exc
        return _load(stream, name, head, size, max_pixels)
    finally:
        if stream is not source:
            stream.close()


def looks_like_dicom(source: str | os.PathLike[str] | bytes | BinaryIO) -> bool:
    """True when the input has the DICOM Part 10 marker ('DICM' at byte 128).

    A stream is read from its current position and put back there; an unreadable path is
    False (the bitmap reader then names the problem).
    """
    if isinstance(source, bytes):
        return source[128:132] == b"DICM"
    if isinstance(source, str | os.PathLike):
        try:
            with Path(source).open("rb") as fp:
                return fp.read(132)[128:132] == b"DICM"
        except OSError:
            return False
    start = source.tell()
    try:
        return source.read(132)[128:132] == b"DICM"
    finally:
        source.seek(start)


def _load(
    data: bytes | BinaryIO, name: str, head: bytes, size: int, max_pixels: int | None
) -> DicomImage:
    start = 0 if isinstance(data, bytes) else data.tell()
    if len(head) >= 132 and head[128:132] == b"DICM":
        return read_dicom(data, max_pixels=max_pixels, name=name)
    try:
        return read_bitmap(data, name=name, max_pixels=max_pixels)
    except UnsupportedImageError as bitmap_error:
        if "not a recognised image" not in str(bitmap_error):
            raise
        if not isinstance(data, bytes):
            data.seek(start)
        try:
            # Part 10 files without preamble exist in old archives.
            return read_dicom(data, max_pixels=max_pixels, name=name)
        except InvalidDicomError:
            raise UnsupportedImageError(
                f"{name}: not a DICOM, PNG, JPEG or TIFF image ({size} bytes)"
            ) from None


def _open_stream(source: str | os.PathLike[str] | BinaryIO, filename: str | None) -> BinaryIO:
    if not isinstance(source, str | os.PathLike):
        return source
    try:
        return Path(source).open("rb")
    except OSError as exc:
        raise ImageError(f"{filename or source}: cannot read file ({exc.strerror or exc})") from exc


def read_bitmap(
    data: bytes | BinaryIO, *, name: str = "<bytes>", max_pixels: int | None = None
) -> DicomImage:
    """Decode PNG/JPEG/TIFF (bytes or a seekable stream) into grey float32 (rows, columns)
    scaled min/max to [0, 1].

    Raises:
        UnsupportedImageError: not a recognised image, animated/multi-page, or too small.
        ImageTooLargeError: a side above the size limit or more than `max_pixels` pixels
            (checked on the header, before decoding), or a Pillow decompression bomb.
        CorruptImageError: the header reads but the data is truncated or corrupt.
    """
    from PIL import Image, UnidentifiedImageError

    with reading(name):
        try:
            im = Image.open(io.BytesIO(data) if isinstance(data, bytes) else data)
        except Image.DecompressionBombError as exc:
            raise ImageTooLargeError(
                f"{name}: Pillow refuses this image as a decompression bomb ({exc}); "
                "downsample it before submitting"
            ) from exc
        except (UnidentifiedImageError, OSError) as exc:
            raise UnsupportedImageError(f"{name}: not a recognised image ({exc})") from exc
        with im:
            return _read_opened(name, im, max_pixels)


def _read_opened(name: str, im: Image.Image, max_pixels: int | None) -> DicomImage:
    from PIL import Image

    if im.format not in _BITMAP_FORMATS:
        raise UnsupportedImageError(
            f"{name}: image format {im.format} is not supported; expected DICOM, PNG, JPEG or TIFF"
        )
    columns, rows = im.size
    # Checked before decoding: Image.open is lazy, so a decompression bomb costs nothing.
    check_dimensions(name, rows, columns, max_pixels)
    if im.format == "JPEG":
        check_scans(name, _encoded(im))
    frames = int(getattr(im, "n_frames", 1))
    if frames > 1:
        raise UnsupportedImageError(
            f"{name}: image has {frames} frames; only single-frame images are supported"
        )
    mode = im.mode
    try:
        with warnings.catch_warnings():
            # Our own size limits came first; Pillow's warning adds nothing.
            warnings.simplefilter("ignore", Image.DecompressionBombWarning)
            arr = _grey_array(im)
    except Image.DecompressionBombError as exc:
        raise ImageTooLargeError(
            f"{name}: Pillow refuses this image as a decompression bomb ({exc}); "
            "downsample it before submitting"
        ) from exc
    except (OSError, ValueError, SyntaxError) as exc:
        raise CorruptImageError(f"{name}: truncated or corrupt image ({exc})") from exc
    if arr.shape != (rows, columns):
        raise CorruptImageError(
            f"{name}: decoded image is {arr.shape} but its header says {rows}x{columns}"
        )
    with np.errstate(all="ignore"):
        lo, hi = float(arr.min()), float(arr.max())
        if not (np.isfinite(lo) and np.isfinite(hi)):
            raise UnsupportedImageError(
                f"{name}: image holds non-finite values (NaN or infinity); expected a radiograph"
            )
        # In place: the same float32 operations as `(arr - lo) / (hi - lo)` without its two
        # full-size temporaries (issue 18 item 13).
        pixels = arr if arr.flags.writeable else arr.copy()
        if hi > lo:
            pixels -= lo
            pixels /= hi - lo
        else:
            pixels.fill(0.0)
    bits = 16 if mode.startswith("I") else 8
    meta = ImageMeta(rows=rows, columns=columns, bits_stored=bits, photometric="MONOCHROME2")
    return DicomImage(pixels=np.ascontiguousarray(pixels, dtype=np.float32), meta=meta)


def _encoded(im: Image.Image) -> bytes:
    """The bytes of the file Pillow opened (it has read only the header so far)."""
    fp: BinaryIO | None = getattr(im, "fp", None)
    if fp is None:
        return b""
    position = fp.tell()
    fp.seek(0)
    try:
        return bytes(fp.read())
    finally:
        fp.seek(position)


def _grey_array(im: Image.Image) -> np.ndarray:
    if im.mode in {"I;16", "I;16B", "I;16L", "I", "F"}:
        return np.asarray(im, dtype=np.float32)
    if im.mode == "L":
        return np.asarray(im, dtype=np.float32)
    # RGB/RGBA/LA/P: NIH's RGBA files are grey with an opaque alpha; use luma, drop alpha.
    return np.asarray(im.convert("L"), dtype=np.float32)


@dataclass(frozen=True)
class IntegerImage:
    """A grey image as the integers it was stored with, and the window that maps them to [0, 1].

    `(pixels - low) / (high - low)` is what `load_image` returns (0 where high == low); the
    training loader resizes the integers and applies the window to the small result, never
    holding a full-size float copy (issue 19).

    Attributes:
        pixels: (rows, columns) uint8 or uint16.
        low, high: the stored values that map to 0 and 1.
    """

    pixels: np.ndarray
    low: float
    high: float


def load_integer_image(
    source: str | os.PathLike[str] | bytes,
    *,
    filename: str | None = None,
    max_pixels: int | None = None,
) -> IntegerImage:
    """Read an image as integers: what `load_image` reads, before any float conversion.

    Bitmaps (PNG, JPEG, TIFF, BMP) are decoded by Pillow as `load_image` decodes them (8 or
    16 bits; colour to grey with Pillow's "L" luma, alpha dropped), after the same header
    checks. DICOM comes back as 16-bit grey through its per-code grey map
    (`models.stored_pixels`), with the window (0, 65535). Anything else (float TIFFs, and
    whatever fails to decode here) goes through `load_image` and comes back quantized the
    same way; an unreadable input raises `load_image`'s error.

    Args:
        source: a path or the file's bytes.
        filename: name used in error messages when `source` is bytes.
        max_pixels: as in `load_image`.

    Returns:
        `IntegerImage` with (rows, columns) uint8 or uint16 pixels.

    Raises:
        ImageError: (a subclass) the input is unreadable, unsupported or too large.
    """
    if isinstance(source, bytes):
        data, name = source, filename or "<bytes>"
    else:
        name = filename or str(source)
        try:
            data = Path(source).read_bytes()
        except OSError as exc:
            raise ImageError(f"{name}: cannot read file ({exc.strerror or exc})") from exc
    fast = _decode_integer(data, name, max_pixels)
    if fast is not None:
        return fast
    if looks_like_dicom(data):
        from models.dicom import read_dicom_stored

        # The per-code grey map straight to 16 bits: no full-size float image.
        stored, _ = read_dicom_stored(data, max_pixels=max_pixels, name=name)
        return IntegerImage(pixels=stored.unit_codes(), low=0.0, high=65535.0)
    pixels = load_image(data, filename=name, max_pixels=max_pixels).pixels
    quantized = (np.clip(pixels, 0.0, 1.0) * 65535.0 + 0.5).astype(np.uint16)
    return IntegerImage(pixels=quantized, low=0.0, high=65535.0)


_GREY_PNG_MODES = {"L": np.uint8, "I;16": np.uint16, "I;16B": np.uint16, "I;16L": np.uint16}


def _decode_integer(data: bytes, name: str, max_pixels: int | None) -> IntegerImage | None:
    """Pillow's decode of a single-frame bitmap as integers; None sends it to `load_image`."""
    from PIL import Image

    if len(data) >= 132 and data[128:132] == b"DICM":
        return None
    try:
        im = Image.open(io.BytesIO(data))  # lazy: reads the header only
    except Exception:  # whatever is wrong, load_image names it
        return None
    with im:
        if im.format not in _BITMAP_FORMATS or int(getattr(im, "n_frames", 1)) > 1:
            return None
        columns, rows = im.size
        check_dimensions(name, rows, columns, max_pixels)
        if im.format == "JPEG":
            check_scans(name, data)
        import cv2

        arr: np.ndarray | None = None
        if im.format == "PNG" and im.mode in _GREY_PNG_MODES:
            # ChestX-ray14's case: OpenCV decodes a grey PNG straight into an array, 15%
            # faster than Pillow's decode plus its copy out (issue 19).
            arr = cv2.imdecode(np.frombuffer(data, np.uint8), cv2.IMREAD_UNCHANGED)
            if arr is None or arr.dtype != _GREY_PNG_MODES[im.mode] or arr.ndim != 2:
                arr = None
        try:
            if arr is None:
                with warnings.catch_warnings():
                    warnings.simplefilter("ignore", Image.DecompressionBombWarning)
                    arr = _integer_array(im)
        except Exception:  # truncated, corrupt, a bomb: load_image names it
            return None
    if arr is None or arr.shape != (rows, columns):
        return None
    low, high = cv2.minMaxLoc(arr)[:2]
    return IntegerImage(pixels=arr, low=float(low), high=float(high))


def _integer_array(im: Image.Image) -> np.ndarray | None:
    if im.mode == "L":
        return np.asarray(im)
    if im.mode in {"I;16", "I;16B", "I;16L"}:
        return np.asarray(im).astype(np.uint16)  # native byte order
    if im.mode == "I":
        arr = np.asarray(im)
        if arr.size and (arr.min() < 0 or arr.max() > 65535):
            return None
        return arr.astype(np.uint16)
    if im.mode == "F":
        return None
    # RGB/RGBA/LA/P/1: as _grey_array, luma, alpha dropped.
    return np.asarray(im.convert("L"))
