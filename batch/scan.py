"""Classify a file from its name and DICOM header (pixels not decoded), for every source.

| kind       | what it is                                   | what the processor does        |
|------------|----------------------------------------------|--------------------------------|
| `image`    | DICOM with pixel data, projection modality   | done (or failed: unreadable)   |
| `bitmap`   | .png/.jpg/.tif next to the DICOMs            | done (or failed)               |
| `sr`       | DICOM Structured Report: its text is labeled | done (or failed)               |
| `dicomdir` | the export's index file                      | skipped (files are walked)     |
| `other`    | a non-image DICOM (GSPS, PDF), or CT/MR/...  | skipped, with the reason       |
| `ignored`  | viewer software, README.TXT, .DS_Store, ...  | skipped, with the reason       |
| `invalid`  | not DICOM, truncated or corrupt              | failed, with the reader's error|

An instance of an image storage SOP Class (CR, DX, MG, secondary capture, CT...: any class
pydicom's UID dictionary names "... Image Storage") without Pixel Data is `invalid`, not
`other`: pydicom stops quietly at the end of a file cut before its Pixel Data, and the Image
Pixel module is mandatory in those classes, so the file is truncated, as POST
/v1/images/predict says of the same bytes.
"""

from __future__ import annotations

import re
from pathlib import Path

from batch.interfaces import SourceItem
from batch.limits import call_with_limit

__all__ = ["DEFAULT_MODALITIES", "classify_file", "describe_error"]

#: Series modalities a PACS pull (DICOMweb) takes unless told otherwise: computed and digital
#: radiography. Which Modality a file may carry to be read as an image is wider
#: (`models.dicom.ACCEPTED_MODALITIES`).
DEFAULT_MODALITIES: tuple[str, ...] = ("CR", "DX")

_BITMAP_EXT = {".png", ".jpg", ".jpeg", ".tif", ".tiff", ".bmp"}
# Files that ride along on PACS export media (viewers, autorun, docs): never DICOM.
_IGNORED_EXT = {
    ".txt", ".htm", ".html", ".xml", ".xsl", ".css", ".js", ".json", ".pdf", ".inf", ".ini",
    ".exe", ".dll", ".ico", ".bat", ".sh", ".cfg", ".md", ".csv", ".zip", ".log", ".jar",
}  # fmt: skip
_IGNORED_NAMES = {".ds_store", "thumbs.db", "desktop.ini"}
_UID = re.compile(r"[0-9]+(\.[0-9]+)*")


def _image_storage_name(sop_class: str | None) -> str | None:
    """The name of `sop_class` if it is an image storage SOP Class (whose instances must
    hold Pixel Data), else None."""
    if not sop_class or len(sop_class) > 64 or not _UID.fullmatch(sop_class):
        return None  # in no dictionary; checked first, as pydicom's UID() warns about it
    from pydicom.uid import UID

    uid = UID(sop_class)
    return uid.name if uid.type == "SOP Class" and "Image Storage" in uid.name else None


def describe_error(exc: BaseException, path: Path, key: str) -> str:
    """One input's failure as a line: the reader's message with the server path replaced by
    the item's key (no absolute storage paths in results), prefixed by the exception type
    when it is not one of the readers' own errors."""
    from models.errors import ImageError

    message = str(exc).replace(str(path), key) or "no message"
    if isinstance(exc, ImageError | OSError):
        return message
    # A decoder's own exception (zlib.error, TypeError, ...) escaped the reader: name it.
    kind = type(exc)
    name = (
        kind.__qualname__
        if kind.__module__ == "builtins"
        else f"{kind.__module__}.{kind.__qualname__}"
    )
    return f"{key}: unexpected {name} while reading: {message}"


def classify_file(path: Path, key: str, *, timeout_s: float | None = None) -> SourceItem:
    """Classify one local file; a header that cannot be read makes it `invalid`.

    Never raises for a bad file: whatever the header reader raises is this file's note.

    Args:
        path: the local file.
        key: the item's stable key (its path relative to the export, for folders).
        timeout_s: give up reading the header after this long (None: no limit).
    """
    from models.dicom import ACCEPTED_MODALITIES, read_dicom_header

    name = path.name.lower()
    ext = path.suffix.lower()
    if name in _IGNORED_NAMES or ext in _IGNORED_EXT:
        return SourceItem(key, "ignored", note=f"not a DICOM file ({ext or name})")
    if ext in _BITMAP_EXT:
        return SourceItem(key, "bitmap")
    try:
        header = call_with_limit(lambda: read_dicom_header(path), timeout_s)
    except Exception as exc:  # noqa: BLE001 - one file's failure, whatever the decoder raised
        return SourceItem(key, "invalid", note=describe_error(exc, path, key))
    common = {
        "study_instance_uid": header.study_instance_uid,
        "accession_number": header.accession_number,
    }
    if header.is_dicomdir:
        return SourceItem(
            key, "dicomdir", note="DICOMDIR index; the files it lists are read directly"
        )
    if header.is_structured_report:
        return SourceItem(key, "sr", **common)
    if not header.has_pixel_data and header.sop_class_uid is None:
        # Every instance names its SOP Class (Type 1, in the file meta too): a file cut short
        # inside its header, not an object of another kind to pass over.
        return SourceItem(
            key,
            "invalid",
            note="no SOP Class UID and no pixel data: the file ends inside its header (or is "
            "not a DICOM instance); re-export it from the source system",
            **common,
        )
    if not header.has_pixel_data:
        image_class = _image_storage_name(header.sop_class_uid)
        if image_class is not None:
            return SourceItem(
                key,
                "invalid",
                note=f"truncated: no pixel data ({image_class}, SOP Class "
                f"{header.sop_class_uid}): the file ends before its Pixel Data; re-export "
                "it from the source system",
                **common,
            )
        return SourceItem(
            key, "other", note=f"no pixel data (SOP Class {header.sop_class_uid})", **common
        )
    modality = (header.modality or "").upper()
    if modality not in ACCEPTED_MODALITIES:
        return SourceItem(
            key, "other", note=f"Modality {modality} is not a projection radiograph", **common
        )
    return SourceItem(key, "image", **common)
