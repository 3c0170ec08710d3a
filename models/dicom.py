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
import os
import warnings
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, BinaryIO

import numpy as np

from models.errors import (
    ImageTooLargeError,
    InvalidDicomError,
    MissingPixelData,
    UnsupportedImageError,
    UnsupportedTransferSyntax,
)

__all__ = [
    "ACCEPTED_MODALITIES",
    "MAX_DIMENSION",
    "MIN_DIMENSION",
    "DicomHeader",
    "DicomImage",
    "ImageMeta",
    "check_dimensions",
    "read_dicom",
    "read_dicom_header",
    "read_sr_text",
]

MAX_DIMENSION = 10_000
MIN_DIMENSION = 32
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


def _open(source: Source) -> BinaryIO | str:
    if isinstance(source, bytes):
        return io.BytesIO(source)
    if isinstance(source, str | os.PathLike):
        path = Path(source)
        if not path.is_file():
            raise InvalidDicomError(f"{path}: no such file")
        return str(path)
    return source


def _dcmread(source: Source, **kwargs: Any) -> Any:
    """Parse a dataset; accept files without the 128-byte preamble only if they look like DICOM."""
    import pydicom
    from pydicom.errors import InvalidDicomError as PydicomInvalid

    name = _name(source)
    fp = _open(source)
    start = fp.tell() if not isinstance(fp, str) else 0
    try:
        return pydicom.dcmread(fp, **kwargs)
    except PydicomInvalid:
        pass
    except (EOFError, OSError, ValueError, KeyError, TypeError, AttributeError) as exc:
        raise InvalidDicomError(f"{name}: truncated or corrupt DICOM file ({exc})") from exc
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


def _str(ds: Any, keyword: str) -> str | None:
    value = ds.get(keyword)
    if value is None or value == "":
        return None
    return str(value).strip() or None


def _meta(ds: Any) -> ImageMeta:
    file_meta = getattr(ds, "file_meta", None)
    tsuid = file_meta.get("TransferSyntaxUID") if file_meta is not None else None
    bits = ds.get("BitsStored")
    return ImageMeta(
        study_instance_uid=_str(ds, "StudyInstanceUID"),
        series_instance_uid=_str(ds, "SeriesInstanceUID"),
        sop_instance_uid=_str(ds, "SOPInstanceUID"),
        sop_class_uid=_str(ds, "SOPClassUID"),
        accession_number=_str(ds, "AccessionNumber"),
        modality=_str(ds, "Modality"),
        photometric=_str(ds, "PhotometricInterpretation"),
        rows=int(ds.get("Rows") or 0),
        columns=int(ds.get("Columns") or 0),
        bits_stored=int(bits) if bits is not None else None,
        view_position=_str(ds, "ViewPosition"),
        transfer_syntax_uid=str(tsuid) if tsuid else None,
        patient_id=_str(ds, "PatientID"),
    )


def check_dimensions(name: str, rows: int, columns: int) -> None:
    """Reject absurd image sizes before decoding anything.

    Raises:
        ImageTooLargeError: a side exceeds `MAX_DIMENSION` pixels.
        UnsupportedImageError: a side is below `MIN_DIMENSION` pixels.
    """
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
    source: Source, *, accepted_modalities: frozenset[str] = ACCEPTED_MODALITIES
) -> DicomImage:
    """Read a single-frame projection radiograph from a DICOM file.

    Args:
        source: a path, the file's bytes, or a binary stream.
        accepted_modalities: Modality values accepted (missing Modality counts as "").

    Returns:
        `DicomImage` with `pixels` float32 (rows, columns) in [0, 1] after modality LUT,
        VOI LUT/window, MONOCHROME1 inversion and min/max scaling.

    Raises:
        InvalidDicomError: not DICOM, truncated or corrupt.
        MissingPixelData: no (7FE0,0010) Pixel Data element.
        UnsupportedImageError: CT/MR/... modality, multi-frame, palette colour, tiny image.
        ImageTooLargeError: a side above `MAX_DIMENSION`.
        UnsupportedTransferSyntax: no installed decoder for the pixel data.
    """
    name = _name(source)
    ds = _dcmread(source)
    meta = _meta(ds)
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
    frames = int(ds.get("NumberOfFrames") or 1)
    if frames > 1:
        raise UnsupportedImageError(
            f"{name}: Number of Frames (0028,0008) is {frames}; only single-frame radiographs "
            "are supported. Split the series into single images first."
        )
    check_dimensions(name, meta.rows, meta.columns)
    photometric = (meta.photometric or "").upper()
    if photometric not in {"MONOCHROME1", "MONOCHROME2"} | _COLOUR_PHOTOMETRICS:
        raise UnsupportedImageError(
            f"{name}: Photometric Interpretation (0028,0004) is {photometric!r}; expected "
            "MONOCHROME1, MONOCHROME2 or RGB/YBR"
        )
    _check_native_length(name, ds, meta)
    pixels = _decode(name, ds)
    return DicomImage(pixels=_to_unit_grey(ds, pixels, photometric), meta=meta)


def _check_native_length(name: str, ds: Any, meta: ImageMeta) -> None:
    """Fail early and clearly on truncated uncompressed pixel data."""
    tsuid = meta.transfer_syntax_uid
    native = {"1.2.840.10008.1.2", "1.2.840.10008.1.2.1", "1.2.840.10008.1.2.2", None}
    if tsuid not in native or getattr(ds.PixelData, "__len__", None) is None:
        return
    samples = int(ds.get("SamplesPerPixel") or 1)
    bits = int(ds.get("BitsAllocated") or 16)
    expected = meta.rows * meta.columns * samples * bits // 8
    if len(ds.PixelData) < expected:
        raise InvalidDicomError(
            f"{name}: Pixel Data holds {len(ds.PixelData)} bytes but {meta.rows}x{meta.columns}x"
            f"{samples} at {bits} bits needs {expected}; the file is truncated"
        )


def _decode(name: str, ds: Any) -> np.ndarray:
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
        raise InvalidDicomError(f"{name}: pixel data cannot be decoded ({exc})") from exc
    except (ValueError, EOFError, OSError, TypeError, AttributeError, KeyError) as exc:
        raise InvalidDicomError(f"{name}: pixel data is truncated or corrupt ({exc})") from exc


def _to_unit_grey(ds: Any, arr: np.ndarray, photometric: str) -> np.ndarray:
    from pydicom.pixels.processing import apply_modality_lut, apply_voi_lut

    if arr.ndim == 3:
        # pydicom converts YBR to RGB by default; use ITU-R BT.601 luma.
        arr = arr[..., :3].astype(np.float32) @ np.array([0.299, 0.587, 0.114], np.float32)
        out = arr
    else:
        try:
            out = apply_modality_lut(arr, ds)
            out = apply_voi_lut(out, ds, index=0, prefer_lut=True)
        except (ValueError, TypeError, IndexError, KeyError) as exc:
            raise InvalidDicomError(f"modality/VOI LUT cannot be applied ({exc})") from exc
    out = np.asarray(out, dtype=np.float32)
    lo, hi = float(out.min()), float(out.max())
    out = (out - lo) / (hi - lo) if hi > lo else np.zeros_like(out)
    if photometric == "MONOCHROME1":
        out = 1.0 - out
    return np.ascontiguousarray(out, dtype=np.float32)


def read_dicom_header(path: str | os.PathLike[str]) -> DicomHeader:
    """Read the identifying header of a DICOM file without decoding its pixels.

    Large element values (the pixel data) are deferred, not read, so this is cheap.

    Raises:
        InvalidDicomError: the file is not DICOM or is corrupt.
    """
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
