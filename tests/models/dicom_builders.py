"""Builders of small synthetic DICOM datasets for `models` tests (pydicom only)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import numpy as np
from pydicom.dataset import Dataset, FileMetaDataset
from pydicom.uid import ExplicitVRLittleEndian, generate_uid

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
