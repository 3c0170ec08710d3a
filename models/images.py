"""Load any supported image (DICOM, PNG, JPEG, TIFF) as a grey float array in [0, 1].

The NIH ChestX-ray14 release is PNG (some files RGBA-encoded grey), PACS exports
are DICOM: both come out as the same `DicomImage` so the model sees one format.
"""

from __future__ import annotations

import io
import os
import warnings
from pathlib import Path
from typing import TYPE_CHECKING, BinaryIO

import numpy as np

from models.dicom import DicomImage, ImageMeta, check_dimensions, read_dicom, reading
from models.errors import ImageError, ImageTooLargeError, InvalidDicomError, UnsupportedImageError

if TYPE_CHECKING:
    from PIL import Image

__all__ = ["load_image", "read_bitmap"]

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
        InvalidDicomError: anything else Pillow raised (truncated or corrupt data).
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
        raise UnsupportedImageError(f"{name}: truncated or corrupt image ({exc})") from exc
    if arr.shape != (rows, columns):
        raise UnsupportedImageError(
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


def _grey_array(im: Image.Image) -> np.ndarray:
    if im.mode in {"I;16", "I;16B", "I;16L", "I", "F"}:
        return np.asarray(im, dtype=np.float32)
    if im.mode == "L":
        return np.asarray(im, dtype=np.float32)
    # RGB/RGBA/LA/P: NIH's RGBA files are grey with an opaque alpha; use luma, drop alpha.
    return np.asarray(im.convert("L"), dtype=np.float32)
