"""Load any supported image (DICOM, PNG, JPEG, TIFF) as a grey float array in [0, 1].

The NIH ChestX-ray14 release is PNG (some files RGBA-encoded grey), PACS exports
are DICOM: both come out as the same `DicomImage` so the model sees one format.
"""

from __future__ import annotations

import io
import os
from pathlib import Path
from typing import TYPE_CHECKING

import numpy as np

from models.dicom import DicomImage, ImageMeta, check_dimensions, read_dicom
from models.errors import ImageError, InvalidDicomError, UnsupportedImageError

if TYPE_CHECKING:
    from PIL import Image

__all__ = ["load_image", "read_bitmap"]

_BITMAP_FORMATS = frozenset({"PNG", "JPEG", "TIFF", "BMP"})


def load_image(
    source: str | os.PathLike[str] | bytes, *, filename: str | None = None
) -> DicomImage:
    """Read a DICOM or bitmap image.

    DICOM is recognised by the 'DICM' marker at byte 128 (or, failing a bitmap decode, by
    parsing); anything else goes through Pillow.

    Args:
        source: a path or the file's bytes.
        filename: name used in error messages when `source` is bytes.

    Returns:
        `DicomImage`: pixels float32 (rows, columns) in [0, 1]; for bitmaps `meta` has only
        rows, columns, bits_stored and photometric set.

    Raises:
        ImageError: (a subclass) the input is unreadable or unsupported.
    """
    if isinstance(source, bytes):
        data = source
        name = filename or "<bytes>"
    else:
        path = Path(source)
        name = filename or str(path)
        try:
            data = path.read_bytes()
        except OSError as exc:
            raise ImageError(f"{name}: cannot read file ({exc.strerror or exc})") from exc
    if len(data) >= 132 and data[128:132] == b"DICM":
        return read_dicom(data)
    try:
        return read_bitmap(data, name=name)
    except UnsupportedImageError as bitmap_error:
        if "not a recognised image" not in str(bitmap_error):
            raise
        try:
            # Part 10 files without preamble exist in old archives.
            return read_dicom(data)
        except InvalidDicomError:
            raise UnsupportedImageError(
                f"{name}: not a DICOM, PNG, JPEG or TIFF image ({len(data)} bytes)"
            ) from None


def read_bitmap(data: bytes, *, name: str = "<bytes>") -> DicomImage:
    """Decode PNG/JPEG/TIFF bytes into grey float32 (rows, columns) scaled min/max to [0, 1].

    Raises:
        UnsupportedImageError: not a recognised image, animated/multi-page, or too small.
        ImageTooLargeError: a side above the size limit (checked before decoding).
    """
    from PIL import Image, UnidentifiedImageError

    try:
        im = Image.open(io.BytesIO(data))
    except (UnidentifiedImageError, OSError) as exc:
        raise UnsupportedImageError(f"{name}: not a recognised image ({exc})") from exc
    with im:
        if im.format not in _BITMAP_FORMATS:
            raise UnsupportedImageError(
                f"{name}: image format {im.format} is not supported; expected DICOM, PNG, JPEG "
                "or TIFF"
            )
        columns, rows = im.size
        # Checked before decoding: Image.open is lazy, so a decompression bomb costs nothing.
        check_dimensions(name, rows, columns)
        frames = int(getattr(im, "n_frames", 1))
        if frames > 1:
            raise UnsupportedImageError(
                f"{name}: image has {frames} frames; only single-frame images are supported"
            )
        mode = im.mode
        try:
            arr = _grey_array(im)
        except (OSError, ValueError, SyntaxError) as exc:
            raise UnsupportedImageError(f"{name}: truncated or corrupt image ({exc})") from exc
    lo, hi = float(arr.min()), float(arr.max())
    pixels = (arr - lo) / (hi - lo) if hi > lo else np.zeros_like(arr)
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
