"""DICOM input: the only module of the project that imports pydicom.

`read_dicom` turns a chest radiograph into a float32 array in [0, 1] the way the
ChestX-ray8 paper prepared its images: modality LUT (rescale slope/intercept),
then the VOI LUT or the default window stored in the header, then MONOCHROME1
inversion, then min/max scaling. The original geometry is kept (no resizing) so
every output can be mapped back to original pixel coordinates.

Compressed transfer syntaxes are decoded by pydicom's pixel-data plugins
(pylibjpeg + libjpeg/openjpeg/rle), which pydicom imports lazily on first use.
"""

from __future__ import annotations

import io
import math
import os
import re
import struct
import warnings
import zlib
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any, BinaryIO

import numpy as np

from models.errors import (
    ImageError,
    ImageTooLargeError,
    InvalidDicomError,
    MissingPixelData,
    UnsupportedImageError,
    UnsupportedTransferSyntax,
)
from models.j2k_header import check_codestream, read_main_header
from models.jpeg_scans import check_scans
from models.stored_pixels import StoredPixels

if TYPE_CHECKING:
    from pydicom.dataset import Dataset

__all__ = [
    "ACCEPTED_MODALITIES",
    "MAX_DIMENSION",
    "MAX_INFLATED_BYTES",
    "MIN_DIMENSION",
    "DicomHeader",
    "DicomImage",
    "ImageMeta",
    "check_dimensions",
    "reading",
    "read_dicom",
    "read_dicom_dataset",
    "read_dicom_header",
    "read_dicom_stored",
    "read_sr_text",
]

MAX_DIMENSION = 10_000
MIN_DIMENSION = 32
# A Deflated Explicit VR Little Endian dataset is inflated in memory by pydicom; refuse one
# that would grow beyond this (a deflate bomb). 10000x10000 at 16 bits x 3 samples fits.
MAX_INFLATED_BYTES = 1 << 30
# Beyond this much inflated data, a stream that grew more than MAX_DEFLATE_RATIO-fold is
# refused too: under the size limit, 64 KB of deflated zeros still became 64 MiB that
# pydicom parsed as eight million empty elements (30 s and 0.7 GB for one C-STORE). Real
# images deflate a few-fold; their pixels are noisy.
_RATIO_FROM_BYTES = 16 << 20
MAX_DEFLATE_RATIO = 100
_DEFLATED_TS = b"1.2.840.10008.1.2.1.99"
# Projection radiography. OT/SC appear on secondary-capture chest films (see
# ../shared/data/dicom: Modality CR/DX on a Secondary Capture SOP class).
ACCEPTED_MODALITIES = frozenset({"CR", "DX", "DR", "RG", "OT", "SC", "PX", ""})
_COLOUR_PHOTOMETRICS = frozenset({"RGB", "YBR_FULL", "YBR_FULL_422", "YBR_ICT", "YBR_RCT"})
_DICOMDIR_SOP_CLASS = "1.2.840.10008.1.3.10"
_SR_SOP_PREFIX = "1.2.840.10008.5.1.4.1.1.88."

Source = str | os.PathLike[str] | bytes | BinaryIO


@dataclass(frozen=True)
class ImageMeta:
    """Facts about an image; deliberately no patient name or birth date.

    `patient_id` is kept only so that callers can group a patient's images under a
    keyed pseudonym (patient-wise training splits); it is excluded from `repr` and
    must never be logged, stored or returned as is.
    """

    study_instance_uid: str | None = None
    series_instance_uid: str | None = None
    sop_instance_uid: str | None = None
    sop_class_uid: str | None = None
    accession_number: str | None = None
    modality: str | None = None
    photometric: str | None = None
    rows: int = 0
    columns: int = 0
    bits_stored: int | None = None
    view_position: str | None = None
    #: (0020,0020) as `row\\column` directions, e.g. `L\\F` (models.position)
    patient_orientation: str | None = None
    transfer_syntax_uid: str | None = None
    patient_id: str | None = field(default=None, repr=False)


@dataclass
class DicomImage:
    """A decoded grey image and its metadata.

    Attributes:
        pixels: float32 array of shape (rows, columns), values in [0, 1], bright = dense.
        meta: identifiers and acquisition facts (see `ImageMeta`).
    """

    pixels: np.ndarray
    meta: ImageMeta


@dataclass(frozen=True)
class DicomHeader:
    """What a PACS-export scan needs to know about a file, read without decoding pixels."""

    study_instance_uid: str | None
    series_instance_uid: str | None
    sop_instance_uid: str | None
    sop_class_uid: str | None
    accession_number: str | None
    modality: str | None
    is_dicomdir: bool
    is_structured_report: bool
    has_pixel_data: bool


def _name(source: Source) -> str:
    if isinstance(source, str | os.PathLike):
        return str(source)
    return "<bytes>" if isinstance(source, bytes) else getattr(source, "name", "<stream>")


@contextmanager
def reading(name: str) -> Iterator[None]:
    """The boundary of one input: whatever a parser or decoder raises becomes an `ImageError`.

    pydicom, its pixel-data plugins and Pillow raise what they like on hostile input
    (zlib.error, struct.error, NotImplementedError, TypeError, pydicom's
    BytesLengthException, a Rust decoder's PanicException...); each is this input's
    failure, named, never the caller's crash. KeyboardInterrupt and SystemExit pass through.

    Raises:
        ImageError: (a subclass) for any exception raised inside the block.
    """
    try:
        yield
    except ImageError:
        raise
    except MemoryError as exc:
        raise ImageTooLargeError(
            f"{name}: not enough memory to decode this image; it is larger than this machine "
            "can handle. Downsample it, or set a lower pixel limit so such files are refused early."
        ) from exc
    except zlib.error as exc:
        raise InvalidDicomError(
            f"{name}: the deflate-compressed data is corrupt ({exc}); re-export the file "
            "uncompressed or with a valid Deflated Explicit VR Little Endian stream"
        ) from exc
    except _ControlCharacter as exc:
        raise InvalidDicomError(f"{name}: {exc}; the header is malformed. Re-export it.") from exc
    except NotImplementedError as exc:
        raise UnsupportedImageError(
            f"{name}: the file uses an encoding this reader does not support ({exc}); "
            "re-export it as uncompressed MONOCHROME2 (Explicit VR Little Endian)"
        ) from exc
    except BaseException as exc:  # noqa: BLE001 - a decoder's failure is this input's failure
        # Rust decoders (pylibjpeg-rle) panic with pyo3's PanicException, a BaseException;
        # anything else outside Exception (KeyboardInterrupt, SystemExit) must go through.
        if not isinstance(exc, Exception) and type(exc).__name__ != "PanicException":
            raise
        kind = type(exc).__name__
        if isinstance(exc, struct.error | EOFError | OSError | ValueError | IndexError):
            problem = "is truncated or corrupt"
        else:
            problem = "cannot be decoded"
        raise InvalidDicomError(
            f"{name}: the file {problem} ({kind}: {_short(exc)}); re-export it from the source "
            "system, or check that it is a complete DICOM or PNG/JPEG file"
        ) from exc


def _short(exc: BaseException, limit: int = 200) -> str:
    text = " ".join(str(exc).split()) or "no detail"
    return text if len(text) <= limit else text[: limit - 3] + "..."


def _open(source: Source) -> BinaryIO | str:
    if isinstance(source, bytes):
        return io.BytesIO(source)
    if isinstance(source, str | os.PathLike):
        path = Path(source)
        if not path.is_file():
            raise InvalidDicomError(f"{path}: no such file")
        return str(path)
    return source


def _check_deflate(name: str, fp: BinaryIO | str, max_pixels: int | None) -> None:
    """Refuse a deflated dataset that inflates beyond `MAX_INFLATED_BYTES` (a deflate bomb),
    beyond what `max_pixels` pixels of 16-bit RGB could need, or past 16 MiB more than
    `MAX_DEFLATE_RATIO`-fold.

    pydicom inflates the whole dataset in one `zlib.decompress` call, so the check streams
    the inflation first, with bounded output, and stops at the limit.
    """
    limit = MAX_INFLATED_BYTES
    if max_pixels is not None:
        limit = min(limit, max_pixels * 6 + (16 << 20))
    f = open(fp, "rb") if isinstance(fp, str) else fp  # noqa: SIM115 - closed below
    start = 0 if isinstance(fp, str) else f.tell()
    try:
        head = f.read(132 + 12)
        if len(head) < 144 or head[128:132] != b"DICM" or head[132:136] != b"\x02\x00\x00\x00":
            return  # no preamble or no (0002,0000) group length: pydicom decides
        (meta_length,) = struct.unpack("<I", head[140:144])
        meta = f.read(min(meta_length, 1 << 16))
        if _DEFLATED_TS not in meta:
            return
        f.seek(start + 144 + meta_length)
        inflater = zlib.decompressobj(-zlib.MAX_WBITS)
        total = read = 0
        while chunk := f.read(1 << 16):
            read += len(chunk)
            data = chunk
            while data:
                total += len(inflater.decompress(data, 1 << 20))
                data = inflater.unconsumed_tail
                if total > limit:
                    raise ImageTooLargeError(
                        f"{name}: the deflate-compressed dataset inflates beyond "
                        f"{limit >> 20} MiB (a deflate bomb?); re-export it "
                        "uncompressed"
                    )
                consumed = max(1, read - len(data))
                if total > _RATIO_FROM_BYTES and total > MAX_DEFLATE_RATIO * consumed:
                    raise ImageTooLargeError(
                        f"{name}: the deflate-compressed dataset inflates more than "
                        f"{MAX_DEFLATE_RATIO}-fold ({total >> 20} MiB from {consumed >> 10} "
                        "KiB; a deflate bomb?); re-export it uncompressed"
                    )
            if inflater.eof:
                break
    finally:
        if isinstance(fp, str):
            f.close()
        else:
            f.seek(start)


def _dcmread(source: Source, max_pixels: int | None = None, **kwargs: Any) -> Any:
    """Parse a dataset; accept files without the 128-byte preamble only if they look like DICOM.

    Call inside `reading(name)`: pydicom's own exceptions are mapped there.
    """
    import pydicom
    from pydicom.errors import InvalidDicomError as PydicomInvalid

    name = _name(source)
    fp = _open(source)
    _check_deflate(name, fp, max_pixels)
    start = fp.tell() if not isinstance(fp, str) else 0
    try:
        return pydicom.dcmread(fp, **kwargs)
    except PydicomInvalid:
        pass
    # No 'DICM' marker: old ACR-NEMA style files still parse with force=True, but so does
    # random data, so require the elements a real image or document always has.
    if not isinstance(fp, str):
        fp.seek(start)
    try:
        with warnings.catch_warnings():
            # pydicom warns while guessing the encoding of what may be random bytes.
            warnings.simplefilter("ignore")
            ds = pydicom.dcmread(fp, force=True, **kwargs)
        ok = "SOPClassUID" in ds or ("Rows" in ds and "Columns" in ds)
    except Exception:  # noqa: BLE001 - any parse failure here means "not DICOM"
        ok = False
    if not ok:
        raise InvalidDicomError(
            f"{name}: not a DICOM file (no 'DICM' marker at byte 128 and no SOP Class UID); "
            "expected a DICOM Part 10 file"
        )
    return ds


class _ControlCharacter(ValueError):
    """A header string the service would store holds a control character (named by `reading`)."""


# C0 controls and DEL, except ESC (ISO 2022 code extensions) and the whitespace that
# padding and multi-line values use; a NUL inside a UID or an accession number is
# refused by PostgreSQL and never a valid value.
_CONTROL = re.compile(r"[\x00-\x08\x0b\x0e-\x1a\x1c-\x1f\x7f]")


def _str(ds: Any, keyword: str) -> str | None:
    value = ds.get(keyword)
    if value is None or value == "":
        return None
    # NUL and space are the standard's padding (UIDs pad with NUL): strip, then refuse
    # a control character left inside the value.
    text = str(value).strip(" \x00\t\r\n")
    bad = _CONTROL.search(text)
    if bad:
        tag = ds.data_element(keyword).tag
        raise _ControlCharacter(
            f"{keyword} ({tag.group:04X},{tag.element:04X}) holds the control character "
            f"{bad.group()!r} at position {bad.start()}"
        )
    return text or None


# (tag, lowest, highest) of the integer elements the reader relies on; each must hold one value.
_INT_ELEMENTS: dict[str, tuple[str, int, int]] = {
    "Rows": ("0028,0010", 0, 65535),
    "Columns": ("0028,0011", 0, 65535),
    "SamplesPerPixel": ("0028,0002", 1, 4),
    "BitsAllocated": ("0028,0100", 1, 64),
    "BitsStored": ("0028,0101", 1, 64),
    "HighBit": ("0028,0102", 0, 63),
    "PixelRepresentation": ("0028,0103", 0, 1),
    "NumberOfFrames": ("0028,0008", 0, 2**31 - 1),
    "PlanarConfiguration": ("0028,0006", 0, 1),
}


def _int(name: str, ds: Any, keyword: str, default: int | None = None) -> int | None:
    """One integer element, checked: a single value inside the range DICOM allows."""
    tag, lo, hi = _INT_ELEMENTS[keyword]
    value = ds.get(keyword)
    if value is None or value == "":
        return default
    if isinstance(value, list | tuple) or type(value).__name__ == "MultiValue":
        raise InvalidDicomError(
            f"{name}: {keyword} ({tag}) holds {len(value)} values {list(value)[:4]}; "
            "exactly one is allowed (VM 1). The file is malformed; re-export it."
        )
    try:
        number = int(str(value).strip())
    except ValueError:
        raise InvalidDicomError(
            f"{name}: {keyword} ({tag}) is {str(value)[:40]!r}; expected an integer "
            f"in {lo}..{hi}. The file is malformed; re-export it."
        ) from None
    if not lo <= number <= hi:
        raise InvalidDicomError(
            f"{name}: {keyword} ({tag}) is {number}; expected {lo}..{hi}. "
            "The file is malformed; re-export it."
        )
    return number


def _floats(name: str, ds: Any, keyword: str, tag: str) -> list[float] | None:
    value = ds.get(keyword)
    if value is None or value == "":
        return None
    many = hasattr(value, "__iter__") and not isinstance(value, str | bytes)
    values = list(value) if many else [value]
    try:
        numbers = [float(v) for v in values]
    except (TypeError, ValueError):
        numbers = []
    if not numbers or not all(math.isfinite(v) for v in numbers):
        raise InvalidDicomError(
            f"{name}: {keyword} ({tag}) is {str(value)[:40]!r}; expected finite number(s). "
            "The file is malformed; re-export it."
        )
    return numbers


def _meta(name: str, ds: Any) -> ImageMeta:
    file_meta = getattr(ds, "file_meta", None)
    tsuid = file_meta.get("TransferSyntaxUID") if file_meta is not None else None
    return ImageMeta(
        study_instance_uid=_str(ds, "StudyInstanceUID"),
        series_instance_uid=_str(ds, "SeriesInstanceUID"),
        sop_instance_uid=_str(ds, "SOPInstanceUID"),
        sop_class_uid=_str(ds, "SOPClassUID"),
        accession_number=_str(ds, "AccessionNumber"),
        modality=_str(ds, "Modality"),
        photometric=_str(ds, "PhotometricInterpretation"),
        rows=_int(name, ds, "Rows", 0) or 0,
        columns=_int(name, ds, "Columns", 0) or 0,
        bits_stored=_int(name, ds, "BitsStored"),
        view_position=_str(ds, "ViewPosition"),
        patient_orientation=_orientation(ds),
        transfer_syntax_uid=str(tsuid) if tsuid else None,
        patient_id=_str(ds, "PatientID"),
    )


def _orientation(ds: Any) -> str | None:
    value = ds.get("PatientOrientation")
    if value is None or value == "":
        return None
    parts = [str(v) for v in value] if not isinstance(value, str) else value.split("\\")
    text = "\\".join(p.strip(" \x00") for p in parts)[:16]
    return text if text and not _CONTROL.search(text) else None


def check_dimensions(name: str, rows: int, columns: int, max_pixels: int | None = None) -> None:
    """Reject absurd image sizes before decoding anything.

    Args:
        name: the input, for messages.
        rows, columns: the size the header announces.
        max_pixels: refuse more than this many pixels (rows x columns); None: no limit.

    Raises:
        ImageTooLargeError: a side exceeds `MAX_DIMENSION` pixels, or the image has more
            than `max_pixels` pixels.
        UnsupportedImageError: a side is below `MIN_DIMENSION` pixels.
    """
    if max_pixels is not None and rows * columns > max_pixels:
        raise ImageTooLargeError(
            f"{name}: image is {rows}x{columns} = {rows * columns:,} pixels; the limit is "
            f"{max_pixels:,} pixels. Downsample it before submitting."
        )
    if rows > MAX_DIMENSION or columns > MAX_DIMENSION:
        raise ImageTooLargeError(
            f"{name}: image is {rows}x{columns} pixels; the limit is {MAX_DIMENSION} per side. "
            "Downsample it before submitting."
        )
    if rows < MIN_DIMENSION or columns < MIN_DIMENSION:
        raise UnsupportedImageError(
            f"{name}: image is {rows}x{columns} pixels; at least {MIN_DIMENSION} per side is "
            "needed (is this a thumbnail or an icon?)"
        )


def read_dicom(
    source: Source,
    *,
    accepted_modalities: frozenset[str] = ACCEPTED_MODALITIES,
    max_pixels: int | None = None,
    name: str | None = None,
) -> DicomImage:
    """Read a single-frame projection radiograph from a DICOM file.

    Args:
        source: a path, the file's bytes, or a binary stream.
        accepted_modalities: Modality values accepted (missing Modality counts as "").
        max_pixels: refuse an image whose Rows x Columns exceeds this, before decoding.
        name: the input's name in error messages (default: the path, or "<bytes>").

    Returns:
        `DicomImage` with `pixels` float32 (rows, columns) in [0, 1] after modality LUT,
        VOI LUT/window, MONOCHROME1 inversion and min/max scaling.

    Raises:
        InvalidDicomError: not DICOM, truncated, corrupt or malformed (the message names the
            element and its bad value).
        MissingPixelData: no (7FE0,0010) Pixel Data element.
        UnsupportedImageError: CT/MR/... modality, multi-frame, palette colour, tiny image,
            an encoding no installed decoder handles.
        ImageTooLargeError: a side above `MAX_DIMENSION`, more than `max_pixels` pixels.
        UnsupportedTransferSyntax: no installed decoder for the pixel data.
    """
    name = name or _name(source)
    with reading(name):
        return _read_dicom(name, source, accepted_modalities, max_pixels)


def read_dicom_stored(
    source: Source,
    *,
    accepted_modalities: frozenset[str] = ACCEPTED_MODALITIES,
    max_pixels: int | None = None,
    name: str | None = None,
) -> tuple[StoredPixels, ImageMeta]:
    """`read_dicom` without the full-size float image: the stored codes and their grey map.

    Grey integer images (the usual 8-16 bit radiograph) keep their codes; the modality
    LUT, VOI LUT/window and scaling are evaluated once per code. Colour and float images
    are converted as `read_dicom` converts them and quantized to 16 bits.

    Raises:
        the errors of `read_dicom`.
    """
    name = name or _name(source)
    with reading(name):
        ds, meta, pixels, photometric = _decoded(name, source, accepted_modalities, max_pixels)
        grey = _stored(name, ds, pixels, photometric)
        if isinstance(grey, StoredPixels):
            return grey, meta
        quantized = (np.clip(grey, 0.0, 1.0) * 65535.0 + 0.5).astype(np.uint16)
        return StoredPixels.linear(quantized, 0.0, 65535.0), meta


def _read_dicom(
    name: str, source: Source, accepted_modalities: frozenset[str], max_pixels: int | None
) -> DicomImage:
    ds, meta, pixels, photometric = _decoded(name, source, accepted_modalities, max_pixels)
    grey = _stored(name, ds, pixels, photometric)
    out = grey.unit() if isinstance(grey, StoredPixels) else grey
    return DicomImage(pixels=out, meta=meta)


def _stored(name: str, ds: Any, pixels: np.ndarray, photometric: str) -> StoredPixels | np.ndarray:
    """Grey integer pixels as `StoredPixels`; anything else as the float image."""
    if pixels.ndim == 2 and pixels.dtype in (np.uint8, np.uint16, np.int16):
        try:
            stored = StoredPixels.from_codes(
                pixels,
                lambda codes: _grey_band(name, ds, codes),
                invert=photometric == "MONOCHROME1",
            )
        except ValueError:
            pass  # non-finite values somewhere: the per-pixel path names the problem
        else:
            if max(abs(stored.low), abs(stored.high)) < 1e30:
                return stored
    return _to_unit_grey(name, ds, pixels, photometric)


def _decoded(
    name: str, source: Source, accepted_modalities: frozenset[str], max_pixels: int | None
) -> tuple[Any, ImageMeta, np.ndarray, str]:
    """Read, check and decode: (dataset without its pixel data, meta, pixels, photometric)."""
    ds = _dcmread(source, max_pixels)
    meta = _meta(name, ds)
    modality = (meta.modality or "").upper()
    if modality not in accepted_modalities:
        raise UnsupportedImageError(
            f"{name}: Modality (0008,0060) is {modality!r}; expected a projection radiograph "
            f"({', '.join(sorted(m for m in accepted_modalities if m))})"
        )
    if "PixelData" not in ds:
        if meta.modality == "SR":
            why = " (a structured report)"
        elif "Rows" not in ds or "Columns" not in ds:
            # pydicom stops quietly at end of file, so a file cut off in its header looks like
            # a dataset without image elements.
            why = " and no Rows/Columns: the file is truncated or is not an image"
        else:
            why = ""
        raise MissingPixelData(
            f"{name}: the dataset has no Pixel Data (7FE0,0010){why}; expected an image"
        )
    frames = _int(name, ds, "NumberOfFrames", 1) or 1
    if frames > 1:
        raise UnsupportedImageError(
            f"{name}: Number of Frames (0028,0008) is {frames}; only single-frame radiographs "
            "are supported. Split the series into single images first."
        )
    check_dimensions(name, meta.rows, meta.columns, max_pixels)
    photometric = (meta.photometric or "").upper()
    if photometric not in {"MONOCHROME1", "MONOCHROME2"} | _COLOUR_PHOTOMETRICS:
        raise UnsupportedImageError(
            f"{name}: Photometric Interpretation (0028,0004) is {photometric!r}; expected "
            "MONOCHROME1, MONOCHROME2 or RGB/YBR"
        )
    _check_pixel_module(name, ds, meta)
    _check_native_length(name, ds, meta)
    _check_codestream_size(name, ds, meta, max_pixels)
    if photometric.startswith("MONOCHROME"):
        _check_luts(name, ds)
    pixels = _decode(name, ds)
    if pixels.shape[:2] != (meta.rows, meta.columns):
        raise InvalidDicomError(
            f"{name}: decoded pixel data is {'x'.join(map(str, pixels.shape))} but Rows x "
            f"Columns (0028,0010/0011) say {meta.rows}x{meta.columns}; the file is corrupt"
        )
    # The encoded pixel data is no longer needed: free it before the float32 output is
    # made (100 MB for a 7070 x 7070 16-bit image).
    del ds.PixelData
    return ds, meta, pixels, photometric


def _check_pixel_module(name: str, ds: Any, meta: ImageMeta) -> None:
    """The Image Pixel module elements the decoders rely on: one value each, in range."""
    samples = _int(name, ds, "SamplesPerPixel", 1)
    photometric = (meta.photometric or "").upper()
    expected = 1 if photometric.startswith("MONOCHROME") else 3
    if samples != expected:
        raise InvalidDicomError(
            f"{name}: Samples per Pixel (0028,0002) is {samples} but Photometric "
            f"Interpretation {photometric} needs {expected}; the file is malformed"
        )
    allocated = _int(name, ds, "BitsAllocated")
    stored = _int(name, ds, "BitsStored")
    if allocated is not None and allocated not in (1, 8, 16, 32):
        raise UnsupportedImageError(
            f"{name}: Bits Allocated (0028,0100) is {allocated}; expected 8, 16 or 32"
        )
    if allocated is not None and stored is not None and stored > allocated:
        raise InvalidDicomError(
            f"{name}: Bits Stored (0028,0101) is {stored}, more than Bits Allocated "
            f"(0028,0100) {allocated}; the file is malformed"
        )
    for keyword in ("HighBit", "PixelRepresentation", "PlanarConfiguration"):
        _int(name, ds, keyword)


def _check_native_length(name: str, ds: Any, meta: ImageMeta) -> None:
    """Fail early and clearly on truncated uncompressed pixel data."""
    tsuid = meta.transfer_syntax_uid
    native = {"1.2.840.10008.1.2", "1.2.840.10008.1.2.1", "1.2.840.10008.1.2.2", None}
    if tsuid not in native or getattr(ds.PixelData, "__len__", None) is None:
        return
    samples = _int(name, ds, "SamplesPerPixel", 1) or 1
    bits = _int(name, ds, "BitsAllocated", 16) or 16
    expected = (meta.rows * meta.columns * samples * bits + 7) // 8
    if len(ds.PixelData) < expected:
        raise InvalidDicomError(
            f"{name}: Pixel Data holds {len(ds.PixelData)} bytes but {meta.rows}x{meta.columns}x"
            f"{samples} at {bits} bits needs {expected}; the file is truncated"
        )


_JPEG_SYNTAXES = frozenset(f"1.2.840.10008.1.2.4.{n}" for n in ("50", "51", "57", "70", "80", "81"))
_J2K_SYNTAXES = frozenset(
    f"1.2.840.10008.1.2.4.{n}" for n in ("90", "91", "92", "93", "201", "202", "203")
)
_ITEM_TAG = b"\xfe\xff\x00\xe0"
# SOF0..SOF15 except DHT (C4), JPG (C8) and DAC (CC), plus JPEG-LS SOF55 (F7).
_SOF_MARKERS = frozenset(range(0xC0, 0xD0)) - {0xC4, 0xC8, 0xCC} | {0xF7}


def _check_codestream_size(
    name: str, ds: Any, meta: ImageMeta, max_pixels: int | None = None
) -> None:
    """Compare the size in the JPEG/JPEG 2000 frame header with Rows x Columns, undecoded,
    and refuse a JPEG whose scans repeat (`models.jpeg_scans`) or a JPEG 2000 codestream
    whose structure or decode memory is implausible (`models.j2k_header`).

    The decoders allocate what the codestream announces, so a header that says 64x64 over a
    10000x10000 JPEG would slip past `check_dimensions` and the pixel limit.
    """
    tsuid = meta.transfer_syntax_uid
    if tsuid not in _JPEG_SYNTAXES and tsuid not in _J2K_SYNTAXES:
        return
    fragment = _first_fragment(ds.PixelData)
    if fragment is None:
        raise InvalidDicomError(
            f"{name}: the encapsulated Pixel Data (7FE0,0010) has no readable first fragment; "
            "the file is truncated or corrupt. Re-export it."
        )
    size = _jpeg_size(fragment) if tsuid in _JPEG_SYNTAXES else _j2k_size(fragment)
    if size is None:
        kind = "JPEG" if tsuid in _JPEG_SYNTAXES else "JPEG 2000"
        raise InvalidDicomError(
            f"{name}: the Pixel Data has no readable {kind} frame header for Transfer Syntax "
            f"{tsuid}; the file is corrupt. Re-export it."
        )
    if size != (meta.rows, meta.columns):
        raise InvalidDicomError(
            f"{name}: the compressed frame is {size[0]}x{size[1]} but Rows x Columns "
            f"(0028,0010/0011) say {meta.rows}x{meta.columns}; the file is inconsistent. "
            "Re-export it."
        )
    if tsuid in _JPEG_SYNTAXES:
        frames = _int(name, ds, "NumberOfFrames", 1) or 1
        check_scans(name, b"".join(_fragments(ds.PixelData)), frames=frames)
        return
    header = read_main_header(fragment)
    if header is None:
        raise InvalidDicomError(
            f"{name}: the JPEG 2000 main header (SIZ, COD) is missing or cut off; the file "
            "is corrupt. Re-export it."
        )
    check_codestream(name, header, len(ds.PixelData), max_pixels)


def _first_fragment(pixel_data: bytes, limit: int = 1 << 20) -> bytes | None:
    """The start of the first fragment after the Basic Offset Table (PS3.5 A.4)."""
    if len(pixel_data) < 16 or pixel_data[:4] != _ITEM_TAG:
        return None
    pos = 8 + int.from_bytes(pixel_data[4:8], "little")
    if pixel_data[pos : pos + 4] != _ITEM_TAG:
        return None
    length = int.from_bytes(pixel_data[pos + 4 : pos + 8], "little")
    return pixel_data[pos + 8 : pos + 8 + min(length, limit)]


def _fragments(pixel_data: bytes) -> Iterator[bytes]:
    """Every fragment after the Basic Offset Table, up to the sequence delimiter or the
    end of the data (PS3.5 A.4)."""
    pos = 0
    first = True
    while pos + 8 <= len(pixel_data) and pixel_data[pos : pos + 4] == _ITEM_TAG:
        length = int.from_bytes(pixel_data[pos + 4 : pos + 8], "little")
        if not first:
            yield pixel_data[pos + 8 : pos + 8 + length]
        first = False
        pos += 8 + length


def _jpeg_size(data: bytes) -> tuple[int, int] | None:
    """(height, width) from the first SOF marker, walking the marker segments from SOI."""
    i = data.find(b"\xff\xd8", 0, 64)
    if i < 0:
        return None
    i += 2
    while i + 4 <= len(data):
        if data[i] != 0xFF:
            return None
        marker = data[i + 1]
        if marker == 0xFF:  # fill byte
            i += 1
        elif marker in _SOF_MARKERS:
            if i + 9 > len(data):
                return None
            return int.from_bytes(data[i + 5 : i + 7], "big"), int.from_bytes(
                data[i + 7 : i + 9], "big"
            )
        elif marker == 0xDA:  # a scan before any frame header
            return None
        elif 0xD0 <= marker <= 0xD8 or marker == 0x01:  # markers without a length
            i += 2
        else:
            i += 2 + int.from_bytes(data[i + 2 : i + 4], "big")
    return None


def _j2k_size(data: bytes) -> tuple[int, int] | None:
    """(height, width) from the SIZ segment that follows SOC (a JP2 wrapper is searched)."""
    i = data.find(b"\xff\x4f\xff\x51", 0, 4096)
    if i < 0 or i + 24 > len(data):
        return None
    x, y, x0, y0 = (int.from_bytes(data[i + k : i + k + 4], "big") for k in (8, 12, 16, 20))
    return y - y0, x - x0


def _check_luts(name: str, ds: Any) -> None:
    """Check the modality and VOI LUTs and windows before pydicom applies them.

    pydicom trusts them: a LUT Descriptor of 0 or 64 bits raises NotImplementedError or
    TypeError, a short LUT Data an IndexError, a zero window width a ValueError.
    """
    for keyword, tag in (("RescaleSlope", "0028,1053"), ("RescaleIntercept", "0028,1052")):
        values = _floats(name, ds, keyword, tag)
        if values is not None and len(values) != 1:
            raise InvalidDicomError(
                f"{name}: {keyword} ({tag}) holds {len(values)} values; exactly one is allowed"
            )
        if keyword == "RescaleSlope" and values == [0.0]:
            # Every pixel would become the intercept: a blank image, silently predicted.
            raise InvalidDicomError(
                f"{name}: {keyword} ({tag}) is 0, which maps every pixel to the same value; "
                "expected a non-zero slope. The file is malformed; re-export it."
            )
    for keyword, title in (
        ("ModalityLUTSequence", "Modality LUT Sequence (0028,3000)"),
        ("VOILUTSequence", "VOI LUT Sequence (0028,3010)"),
    ):
        items = ds.get(keyword)
        if items:
            _check_lut_item(f"{name}: {title} item 1", items[0])
    if ds.get("VOILUTSequence"):
        return  # preferred over the window below
    centre = _floats(name, ds, "WindowCenter", "0028,1050")
    width = _floats(name, ds, "WindowWidth", "0028,1051")
    if centre is not None and width is not None and width[0] < 1:
        raise InvalidDicomError(
            f"{name}: Window Width (0028,1051) is {width[0]:g}; expected at least 1. "
            "The file is malformed; re-export it."
        )


def _check_lut_item(where: str, item: Any) -> None:
    descriptor = item.get("LUTDescriptor")
    data = item.get("LUTData")
    if descriptor is None or data is None:
        raise InvalidDicomError(
            f"{where} lacks LUT Descriptor (0028,3002) or LUT Data (0028,3006); the file is "
            "malformed. Re-export it without the LUT or with a complete one."
        )
    values = list(descriptor) if hasattr(descriptor, "__len__") else [descriptor]
    if len(values) != 3 or not all(isinstance(v, int) for v in values):
        raise InvalidDicomError(
            f"{where}: LUT Descriptor (0028,3002) is {values[:4]}; expected three integers "
            "(entries, first mapped value, bits per entry). Re-export the image without this "
            "LUT or with a valid one."
        )
    entries, _, bits = values
    entries = entries or 65536  # PS3.3 C.11.1.1: 0 means 2^16 entries
    if bits not in (8, *range(10, 17)):
        raise InvalidDicomError(
            f"{where}: LUT Descriptor (0028,3002) gives {bits} bits per entry; expected 8 or "
            "10..16 (PS3.3 C.11.2.1.1). Re-export the image without this LUT or with a valid one."
        )
    # LUT Data is US (a list of ints, or one int for a 1-entry LUT) or OW (raw bytes).
    if isinstance(data, bytes):
        count = len(data) // 2
    else:
        count = len(data) if hasattr(data, "__len__") else 1
    if count != entries:
        raise InvalidDicomError(
            f"{where}: LUT Data (0028,3006) has {count} entries but the LUT Descriptor "
            f"(0028,3002) announces {entries}; the LUT is truncated or malformed. "
            "Re-export the image without this LUT or with a valid one."
        )
    if not isinstance(data, bytes):
        numbers = list(data) if hasattr(data, "__len__") else [data]
        # pydicom stores 8-bit LUTs as uint8 and the others as uint16.
        top = 2**8 if bits == 8 else 2**16
        if any(not isinstance(v, int) or not 0 <= v < top for v in numbers):
            raise InvalidDicomError(
                f"{where}: LUT Data (0028,3006) holds values outside 0..{top - 1} for "
                f"{bits}-bit entries; the LUT is malformed. Re-export the image without this "
                "LUT or with a valid one."
            )


# Uncompressed little-endian transfer syntaxes: their pixel data is the image as stored.
_NATIVE_LITTLE_ENDIAN = frozenset({"1.2.840.10008.1.2", "1.2.840.10008.1.2.1"})


def _native_grey(ds: Any) -> np.ndarray | None:
    """An unsigned single-frame grey image stored uncompressed, read straight from the
    bytes (read-only) or, when bits above Bits Stored are set, a copy with them cleared:
    what pydicom's `pixel_array` returns, without its copy and correcting pass. None for
    anything else."""
    file_meta = getattr(ds, "file_meta", None)
    tsuid = str(file_meta.get("TransferSyntaxUID", "")) if file_meta is not None else ""
    allocated, stored = ds.get("BitsAllocated"), ds.get("BitsStored")
    if (
        tsuid not in _NATIVE_LITTLE_ENDIAN
        or ds.get("SamplesPerPixel", 1) != 1
        or ds.get("PixelRepresentation") != 0
        or allocated not in (8, 16)
        or not isinstance(stored, int)
        or not 1 <= stored <= allocated
        or ds.get("HighBit", stored - 1) != stored - 1
    ):
        return None
    rows, columns = int(ds.Rows), int(ds.Columns)
    data = ds.PixelData
    dtype = np.dtype("<u2") if allocated == 16 else np.dtype(np.uint8)
    if not isinstance(data, bytes) or len(data) < rows * columns * dtype.itemsize:
        return None  # pydicom's decoder names the problem
    view = np.frombuffer(data, dtype, count=rows * columns).reshape(rows, columns)
    if stored == allocated or int(view.max()) < 1 << stored:
        # Nothing to clear (the usual case): the bytes are the image, read-only. Finding
        # the maximum reads the image once; masking would also write a copy.
        return view
    out: np.ndarray = np.bitwise_and(view, dtype.type((1 << stored) - 1))
    return out


def _decode(name: str, ds: Any) -> np.ndarray:
    fast = _native_grey(ds)
    if fast is not None:
        return fast
    try:
        return np.asarray(ds.pixel_array)
    except (NotImplementedError, RuntimeError) as exc:
        tsuid = ds.file_meta.get("TransferSyntaxUID", "unknown")
        text = str(exc)
        if "decod" in text.lower() or "plugin" in text.lower() or "transfer syntax" in text.lower():
            raise UnsupportedTransferSyntax(
                f"{name}: cannot decode pixel data with Transfer Syntax UID {tsuid} "
                f"({getattr(tsuid, 'name', '')}); install a pydicom decoder plugin for it "
                "(pylibjpeg-libjpeg, pylibjpeg-openjpeg, pylibjpeg-rle) or re-export uncompressed"
            ) from exc
        raise InvalidDicomError(f"{name}: pixel data cannot be decoded ({_short(exc)})") from exc
    except (ValueError, EOFError, OSError, TypeError, AttributeError, KeyError) as exc:
        raise InvalidDicomError(
            f"{name}: pixel data is truncated or corrupt ({_short(exc)}); re-export the file"
        ) from exc


# Rows per band of `_to_unit_grey`: about 260,000 pixels, so pydicom's float64 modality
# and VOI LUT temporaries cost a few MB each instead of 8 bytes a pixel of the whole image
# (issue 18 item 13: +1.57 GB for a 7070 x 7070 16-bit image with a Rescale Slope).
_BAND_PIXELS = 1 << 18


def _to_unit_grey(name: str, ds: Any, arr: np.ndarray, photometric: str) -> np.ndarray:
    """Modality LUT, VOI LUT/window (or luma for colour), then min/max scaling to [0, 1].

    Computed in bands of rows into one float32 output: every step is per pixel, so the
    result is bit for bit what the whole-image computation gave, and the only full-size
    allocation is the float32 output (4 bytes a pixel).
    """
    rows = int(arr.shape[0])
    step = max(1, _BAND_PIXELS // max(1, int(arr.shape[1])))
    out = np.empty(arr.shape[:2], np.float32)
    lo, hi = math.inf, -math.inf
    for top in range(0, rows, step):
        band = _grey_band(name, ds, arr[top : top + step])
        with np.errstate(all="ignore"):
            band_lo, band_hi = float(np.min(band)), float(np.max(band))
        if not (math.isfinite(band_lo) and math.isfinite(band_hi)):
            raise InvalidDicomError(
                f"{name}: pixel values are not finite after Rescale Slope/Intercept and the "
                "VOI LUT/window; check (0028,1053), (0028,1052), (0028,1050) and (0028,1051)"
            )
        lo, hi = min(lo, band_lo), max(hi, band_hi)
        if max(abs(band_lo), abs(band_hi)) < 1e30:
            out[top : top + step] = band  # the float32 cast np.array(..., float32) made
    with np.errstate(all="ignore"):
        if not hi > lo:
            out.fill(0.0)
        elif max(abs(lo), abs(hi)) < 1e30:
            # Scaled in place: a 10000 x 10000 image costs 400 MB here, not the 2.4 GB of
            # float64 temporaries (issue 7, item 5).
            out -= np.float32(lo)
            out *= np.float32(1.0 / (hi - lo))
        else:  # values beyond float32's range: scale each band in float64 first
            for top in range(0, rows, step):
                band = np.asarray(_grey_band(name, ds, arr[top : top + step]), np.float64)
                out[top : top + step] = (band - lo) / (hi - lo)
    if photometric == "MONOCHROME1":
        np.subtract(np.float32(1.0), out, out=out)
    return out


def _grey_band(name: str, ds: Any, band: np.ndarray) -> np.ndarray:
    """One band of rows through the modality and VOI LUTs (grey) or to luma (colour)."""
    from pydicom.pixels.processing import apply_modality_lut, apply_voi_lut

    if band.ndim == 3:
        # pydicom converts YBR to RGB by default; use ITU-R BT.601 luma.
        luma: np.ndarray = band[..., :3].astype(np.float32) @ np.array(
            [0.299, 0.587, 0.114], np.float32
        )
        return luma
    try:
        with warnings.catch_warnings():
            # "VOI LUT on a float input array": expected after a rescale, and harmless.
            warnings.simplefilter("ignore")
            out = apply_modality_lut(band, ds)
            return np.asarray(apply_voi_lut(out, ds, index=0, prefer_lut=True))
    except (ValueError, TypeError, IndexError, KeyError) as exc:
        raise InvalidDicomError(
            f"{name}: modality/VOI LUT cannot be applied ({_short(exc)}); re-export the "
            "image without them or with valid ones"
        ) from exc


def read_dicom_header(path: Source) -> DicomHeader:
    """Read the identifying header of a DICOM file (a path, bytes or a stream) without
    decoding its pixels.

    Large element values (the pixel data) are deferred, not read, so this is cheap.

    Raises:
        InvalidDicomError: the file is not DICOM or is corrupt (whatever pydicom raised).
        ImageError: (another subclass) e.g. a deflate bomb.
    """
    name = _name(path)
    with reading(name):
        return _read_header(path)


def read_dicom_dataset(path: Source, *, max_pixels: int | None = None) -> Dataset:
    """The pydicom dataset of a DICOM file up to its pixel data, for callers that need more
    elements than `DicomHeader` keeps (a C-STORE's UIDs, an SR's source references).

    What `read_dicom_header` guards against is guarded here too: a Deflated Explicit VR
    Little Endian dataset is inflated by pydicom whole, whatever `stop_before_pixels`
    says, so one that would inflate beyond `MAX_INFLATED_BYTES` (or what `max_pixels`
    pixels need) is refused first, its inflation streamed with bounded memory.

    Raises:
        InvalidDicomError: the file is not DICOM or is corrupt.
        ImageError: (another subclass) e.g. a deflate bomb.
    """
    name = _name(path)
    with reading(name):
        ds: Dataset = _dcmread(path, max_pixels, stop_before_pixels=True, defer_size=4096)
        return ds


def _read_header(path: Source) -> DicomHeader:
    ds = _dcmread(path, defer_size=1024)
    sop_class = _str(ds, "SOPClassUID")
    if sop_class is None and getattr(ds, "file_meta", None) is not None:
        sop_class = ds.file_meta.get("MediaStorageSOPClassUID")
        sop_class = str(sop_class) if sop_class else None
    modality = _str(ds, "Modality")
    return DicomHeader(
        study_instance_uid=_str(ds, "StudyInstanceUID"),
        series_instance_uid=_str(ds, "SeriesInstanceUID"),
        sop_instance_uid=_str(ds, "SOPInstanceUID"),
        sop_class_uid=sop_class,
        accession_number=_str(ds, "AccessionNumber"),
        modality=modality,
        is_dicomdir=sop_class == _DICOMDIR_SOP_CLASS or "DirectoryRecordSequence" in ds,
        is_structured_report=modality == "SR" or (sop_class or "").startswith(_SR_SOP_PREFIX),
        has_pixel_data="PixelData" in ds,
    )


# Concept names under which an SR keeps report sections; shown as "FINDINGS:" headings.
_SECTION_NAMES = frozenset(
    {
        "findings",
        "finding",
        "impression",
        "impressions",
        "conclusion",
        "conclusions",
        "history",
        "clinical history",
        "indication",
        "indications",
        "comparison",
        "technique",
        "recommendation",
        "recommendations",
        "summary",
    }
)


def read_sr_text(path: str | os.PathLike[str] | bytes) -> str:
    """Extract the report text of a DICOM Structured Report.

    Walks ContentSequence depth-first; TEXT items give text, CONTAINER items (and TEXT
    items named like a section) give headings such as "FINDINGS:".

    Returns:
        The report text, sections separated by newlines ("" if the SR holds no text).

    Raises:
        InvalidDicomError: not DICOM, or not a structured report.
    """
    name = _name(path)
    with reading(name):
        return _read_sr_text(name, path)


def _read_sr_text(name: str, path: str | os.PathLike[str] | bytes) -> str:
    ds = _dcmread(path)
    modality = _str(ds, "Modality")
    sop_class = _str(ds, "SOPClassUID") or ""
    if modality != "SR" and not sop_class.startswith(_SR_SOP_PREFIX):
        raise InvalidDicomError(
            f"{name}: not a Structured Report (Modality {modality!r}, SOP Class {sop_class!r})"
        )
    lines = list(_sr_lines(ds.get("ContentSequence") or [], depth=0))
    return "\n".join(line for line in lines if line.strip()).strip()


def _concept(item: Any) -> str | None:
    seq = item.get("ConceptNameCodeSequence")
    if not seq:
        return None
    meaning = seq[0].get("CodeMeaning")
    return str(meaning).strip() if meaning else None


def _sr_lines(items: Any, depth: int) -> Iterator[str]:
    if depth > 32:  # malicious nesting; SR trees in practice are a few levels deep
        return
    for item in items:
        kind = str(item.get("ValueType", "")).upper()
        concept = _concept(item)
        if kind == "CONTAINER":
            if concept and concept.lower() in _SECTION_NAMES:
                yield f"{concept.upper()}:"
            yield from _sr_lines(item.get("ContentSequence") or [], depth + 1)
        elif kind == "TEXT":
            text = str(item.get("TextValue", "")).strip()
            if concept and concept.lower() in _SECTION_NAMES:
                yield f"{concept.upper()}: {text}"
            else:
                yield text
            yield from _sr_lines(item.get("ContentSequence") or [], depth + 1)
        else:
            yield from _sr_lines(item.get("ContentSequence") or [], depth + 1)
