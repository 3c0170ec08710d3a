"""Builders of small synthetic DICOM datasets for `models` tests (pydicom only)."""

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

CR_IMAGE_STORAGE = "1.2.840.10008.5.1.4.1.1.1"
BASIC_TEXT_SR = "1.2.840.10008.5.1.4.1.1.88.11"


def build_dataset(
    pixels: np.ndarray | None = None,
    *,
    modality: str = "CR",
    photometric: str = "MONOCHROME2",
    bits: int = 16,
    sop_class: str = CR_IMAGE_STORAGE,
    **elements: Any,
) -> Dataset:
    """A minimal valid DICOM dataset; `pixels` (rows, columns) or (frames, rows, columns)."""
    ds = Dataset()
    ds.file_meta = FileMetaDataset()
    ds.file_meta.TransferSyntaxUID = ExplicitVRLittleEndian
    ds.file_meta.MediaStorageSOPClassUID = sop_class
    ds.file_meta.MediaStorageSOPInstanceUID = generate_uid()
    ds.SOPClassUID = sop_class
    ds.SOPInstanceUID = ds.file_meta.MediaStorageSOPInstanceUID
    ds.StudyInstanceUID = generate_uid()
    ds.SeriesInstanceUID = generate_uid()
    ds.AccessionNumber = "ACC123"
    ds.PatientName = "Test^Patient"
    ds.PatientID = "PID-1"
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
        dtype = np.uint16 if bits == 16 else np.uint8
        ds.PixelData = arr.astype(dtype).tobytes()
    for key, value in elements.items():
        setattr(ds, key, value)
    return ds


def write(ds: Dataset, path: Path) -> Path:
    ds.save_as(path, enforce_file_format=True)
    return path


def gradient(rows: int = 48, columns: int = 64, top: int = 4095) -> np.ndarray:
    """Left-to-right ramp 0..top: a known, asymmetric test pattern."""
    return np.tile(np.linspace(0, top, columns), (rows, 1)).round()


def to_bytes(ds: Dataset) -> bytes:
    """The Part 10 file of `ds` as bytes."""
    buf = io.BytesIO()
    ds.save_as(buf, enforce_file_format=True)
    return buf.getvalue()


def file_meta_bytes(transfer_syntax: str, sop_class: str = CR_IMAGE_STORAGE) -> bytes:
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
    """Poisoned export file 1: Deflated Explicit VR Little Endian whose stream is garbage."""
    garbage = np.random.default_rng(seed).integers(0, 256, 4096, dtype=np.uint8).tobytes()
    return file_meta_bytes(DeflatedExplicitVRLittleEndian) + garbage


def voi_lut_dataset(
    descriptor: tuple[int, int, int] = (256, 0, 0), data_length: int | None = None
) -> Dataset:
    """Poisoned export file 2 (by default): a VOI LUT Sequence whose LUT Descriptor gives
    0 bits per entry; other descriptors (0 entries, 64 bits, short data) are other poisons."""
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
    """Poisoned export file 3: Rows (0028,0010) with two values (VM 2)."""
    ds = build_dataset(gradient(48, 64))
    ds.Rows = [48, 48]
    return ds
