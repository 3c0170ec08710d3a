"""The one builder of synthetic DICOM files for the tests (pydicom and numpy only).

Every test that needs a DICOM builds it here, with one set of defaults: a DX radiograph,
MONOCHROME2, 16 bits allocated and stored, identifying tags set (so the privacy tests can
check that they never leak). Tests state what differs (`modality="CR"`, `bits=8`,
`photometric="MONOCHROME1"`, any element as a keyword). The malformed files ("poisons")
that once broke a decoder or a job are built here too.

`tests/` is on `sys.path` while pytest runs (rootdir conftest), so tests in `tests/app/` and
`tests/models/` import it as `dicom_factory`.
"""

from __future__ import annotations

import io
from pathlib import Path
from typing import Any

import numpy as np
from pydicom.dataset import Dataset, FileMetaDataset
from pydicom.filebase import DicomBytesIO
from pydicom.filewriter import write_file_meta_info
from pydicom.sequence import Sequence as DicomSequence
from pydicom.uid import (
    PYDICOM_IMPLEMENTATION_UID,
    DeflatedExplicitVRLittleEndian,
    ExplicitVRLittleEndian,
    generate_uid,
)

CR_STORAGE = "1.2.840.10008.5.1.4.1.1.1"
DX_STORAGE = "1.2.840.10008.5.1.4.1.1.1.1"
CT_STORAGE = "1.2.840.10008.5.1.4.1.1.2"
BASIC_TEXT_SR = "1.2.840.10008.5.1.4.1.1.88.11"
GSPS_STORAGE = "1.2.840.10008.5.1.4.1.1.11.1"
DICOMDIR_CLASS = "1.2.840.10008.1.3.10"

PATIENT_NAME = "Doe^Jane"
PATIENT_ID = "MRN-0042"
ACCESSION = "ACC-1"


def build_dataset(
    pixels: np.ndarray | None = None,
    *,
    modality: str = "DX",
    sop_class: str = DX_STORAGE,
    photometric: str = "MONOCHROME2",
    bits: int = 16,
    study_uid: str | None = None,
    accession: str = ACCESSION,
    **elements: Any,
) -> Dataset:
    """A small valid DICOM dataset.

    Args:
        pixels: (rows, columns) or (frames, rows, columns) unsigned values; None for no
            Pixel Data (an SR, a presentation state).
        modality, sop_class, photometric: the image's kind.
        bits: Bits Allocated and Bits Stored (8 or 16).
        study_uid: Study Instance UID (default a new one).
        accession: Accession Number.
        **elements: more elements by keyword, set last (they win).
    """
    ds = Dataset()
    ds.file_meta = FileMetaDataset()
    ds.file_meta.TransferSyntaxUID = ExplicitVRLittleEndian
    ds.file_meta.MediaStorageSOPClassUID = sop_class
    ds.file_meta.MediaStorageSOPInstanceUID = generate_uid()
    ds.SOPClassUID = sop_class
    ds.SOPInstanceUID = ds.file_meta.MediaStorageSOPInstanceUID
    ds.StudyInstanceUID = study_uid or generate_uid()
    ds.SeriesInstanceUID = generate_uid()
    ds.AccessionNumber = accession
    ds.PatientName = PATIENT_NAME
    ds.PatientID = PATIENT_ID
    ds.Modality = modality
    if pixels is not None:
        arr = np.asarray(pixels)
        frames = arr.shape[0] if arr.ndim == 3 else 1
        ds.Rows, ds.Columns = arr.shape[-2:]
        ds.SamplesPerPixel = 1
        ds.PhotometricInterpretation = photometric
        ds.BitsAllocated = bits
        ds.BitsStored = bits
        ds.HighBit = bits - 1
        ds.PixelRepresentation = 0
        if frames > 1:
            ds.NumberOfFrames = frames
        ds.PixelData = arr.astype(np.uint16 if bits == 16 else np.uint8).tobytes()
    for key, value in elements.items():
        setattr(ds, key, value)
    return ds


def to_bytes(ds: Dataset) -> bytes:
    """The Part 10 file of `ds` as bytes."""
    buffer = io.BytesIO()
    ds.save_as(buffer, enforce_file_format=True)
    return buffer.getvalue()


def write(ds: Dataset, path: Path) -> Path:
    """Save `ds` as a Part 10 file at `path`."""
    ds.save_as(path, enforce_file_format=True)
    return path


def gradient(rows: int = 48, columns: int = 64, top: int = 4095) -> np.ndarray:
    """Left-to-right ramp 0..top: a known, asymmetric test pattern."""
    return np.tile(np.linspace(0, top, columns), (rows, 1)).round()


def chest_pixels(rows: int = 64, columns: int = 64, seed: int = 0) -> np.ndarray:
    """A smooth 12-bit test image (a bright disc on a ramp)."""
    rng = np.random.default_rng(seed)
    y, x = np.mgrid[0:rows, 0:columns]
    disc = ((y - rows / 2) ** 2 + (x - columns / 2) ** 2 < (rows / 4) ** 2) * 1500
    return (x * 2000 / columns + disc + rng.integers(0, 50, (rows, columns))).astype(np.uint16)


def dx_bytes(**kwargs: Any) -> bytes:
    """A 64x64 DX radiograph (`chest_pixels`) as DICOM file bytes; `build_dataset` keywords."""
    kwargs.setdefault("pixels", chest_pixels())
    return to_bytes(build_dataset(**kwargs))


# --- poisons: malformed files that once broke a decoder or a job --------------------------


def file_meta_bytes(transfer_syntax: str, sop_class: str = DX_STORAGE) -> bytes:
    """Preamble, 'DICM' and a File Meta Information group announcing `transfer_syntax`."""
    meta = FileMetaDataset()
    meta.MediaStorageSOPClassUID = sop_class
    meta.MediaStorageSOPInstanceUID = generate_uid()
    meta.TransferSyntaxUID = transfer_syntax
    meta.ImplementationClassUID = PYDICOM_IMPLEMENTATION_UID
    buf = DicomBytesIO()
    buf.is_little_endian, buf.is_implicit_VR = True, False
    write_file_meta_info(buf, meta, enforce_standard=True)
    return b"\0" * 128 + b"DICM" + buf.getvalue()


def corrupt_deflate(seed: int = 0) -> bytes:
    """Deflated Explicit VR Little Endian whose stream is garbage."""
    garbage = np.random.default_rng(seed).integers(0, 256, 4096, dtype=np.uint8).tobytes()
    return file_meta_bytes(DeflatedExplicitVRLittleEndian) + garbage


def voi_lut_dataset(
    descriptor: tuple[int, int, int] = (256, 0, 0), data_length: int | None = None
) -> Dataset:
    """By default a VOI LUT Sequence whose LUT Descriptor gives 0 bits per entry; other
    descriptors (0 entries, 64 bits, short data) are other poisons."""
    ds = build_dataset(gradient(48, 64, top=255))
    item = Dataset()
    # Both elements have an ambiguous VR (US or SS / US or OW): state it.
    item.add_new(0x00283002, "US", list(descriptor))
    entries = descriptor[0] or 2**16
    n = entries if data_length is None else data_length
    item.add_new(0x00283006, "US", [int(v) for v in np.linspace(0, 255, n)])
    ds.VOILUTSequence = DicomSequence([item])
    return ds


def two_valued_rows_dataset() -> Dataset:
    """Rows (0028,0010) with two values (VM 2)."""
    ds = build_dataset(gradient(48, 64))
    ds.Rows = [48, 48]
    return ds


def scan_bomb_jpeg(side: int = 2048, repeats: int = 3000, seed: int = 0) -> bytes:
    """A grey progressive JPEG of `side` x `side` whose smallest scan after the first is
    repeated `repeats` times before EOI: decoders accept it (libjpeg warns) and make a pass
    over the whole image per scan. 2048 x 2048 with 3,000 repeats is about 60 KB."""
    from PIL import Image

    rng = np.random.default_rng(seed)
    y, x = np.mgrid[0:side, 0:side]
    grey = (np.sin(x / 37.0) + np.cos(y / 23.0)) * 60 + 128 + rng.normal(0, 4, (side, side))
    buffer = io.BytesIO()
    Image.fromarray(grey.clip(0, 255).astype(np.uint8)).save(
        buffer, "JPEG", quality=5, progressive=True
    )
    data = buffer.getvalue()
    starts = [i for i in range(len(data) - 1) if data[i : i + 2] == b"\xff\xda"]
    ends = [*starts[1:], len(data) - 2]
    start, end = min(zip(starts[1:], ends[1:], strict=True), key=lambda se: se[1] - se[0])
    return data[:-2] + data[start:end] * repeats + b"\xff\xd9"


def jpeg_dicom(jpeg: bytes, rows: int, columns: int) -> Dataset:
    """A DX dataset whose Pixel Data is `jpeg` (8-bit grey), encapsulated under the JPEG
    Baseline transfer syntax (as the decoders see it, whatever the JPEG's process)."""
    from pydicom.encaps import encapsulate
    from pydicom.uid import JPEGBaseline8Bit

    ds = build_dataset()
    ds.file_meta.TransferSyntaxUID = JPEGBaseline8Bit
    ds.Rows, ds.Columns = rows, columns
    ds.SamplesPerPixel = 1
    ds.PhotometricInterpretation = "MONOCHROME2"
    ds.BitsAllocated = ds.BitsStored = 8
    ds.HighBit = 7
    ds.PixelRepresentation = 0
    ds.PixelData = encapsulate([jpeg])
    ds["PixelData"].VR = "OB"
    return ds


def j2k_codestream(pixels: np.ndarray, **options: Any) -> bytes:
    """A lossless JPEG 2000 codestream (no JP2 wrapper) of 16-bit grey `pixels`, encoded by
    Pillow's OpenJPEG with its `options` (tile_size, num_resolutions, ...)."""
    from PIL import Image

    buffer = io.BytesIO()
    Image.fromarray(np.asarray(pixels, np.uint16)).save(
        buffer, format="JPEG2000", no_jp2=True, **options
    )
    return buffer.getvalue()


def j2k_dicom(codestream: bytes, rows: int, columns: int, bits_stored: int = 16) -> Dataset:
    """A DX dataset whose Pixel Data is `codestream`, under JPEG 2000 Lossless."""
    from pydicom.encaps import encapsulate
    from pydicom.uid import JPEG2000Lossless

    ds = build_dataset()
    ds.file_meta.TransferSyntaxUID = JPEG2000Lossless
    ds.Rows, ds.Columns = rows, columns
    ds.SamplesPerPixel = 1
    ds.PhotometricInterpretation = "MONOCHROME2"
    ds.BitsAllocated = 16
    ds.BitsStored = bits_stored
    ds.HighBit = bits_stored - 1
    ds.PixelRepresentation = 0
    ds.PixelData = encapsulate([codestream])
    ds["PixelData"].VR = "OB"
    return ds
