"""What the benchmark scripts share: progress lines, a free loopback port, synthetic DX DICOMs.

Scripts run as `python benchmarks/NAME.py`, so this folder is on `sys.path` and they import
this module by its name. Nothing here is timed.
"""

from __future__ import annotations

import io
import os
import socket
import sys
from pathlib import Path
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    import numpy as np
    from pydicom.dataset import Dataset

__all__ = ["DX_SOP_CLASS", "dx_bytes", "dx_dataset", "free_port", "say", "shared_data"]

# Digital X-Ray Image Storage - For Presentation
DX_SOP_CLASS = "1.2.840.10008.5.1.4.1.1.1.1"


def say(text: str) -> None:
    """Print one progress line now (a benchmark's output is read while it runs)."""
    sys.stdout.write(text + "\n")
    sys.stdout.flush()


def shared_data() -> Path:
    """../shared/data beside the repository, or $CXR_SHARED_DATA (real data, never committed)."""
    env = os.environ.get("CXR_SHARED_DATA")
    return Path(env) if env else Path(__file__).resolve().parents[1] / ".." / "shared" / "data"


def free_port() -> int:
    """A TCP port free on 127.0.0.1 at the time of the call."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def dx_dataset(
    rows: int,
    columns: int,
    *,
    bits: int = 16,
    stored: int | None = None,
    syntax: str = "",
    sop_class: str = DX_SOP_CLASS,
) -> Dataset:
    """A DX image header with fresh UIDs, monochrome, unsigned, without pixel data.

    Args:
        rows, columns: the image size.
        bits: Bits Allocated; `stored` (default `bits`) is Bits Stored.
        syntax: the transfer syntax UID; default Explicit VR Little Endian.
        sop_class: the SOP Class UID (default DX; CR for a computed radiograph).
    """
    from pydicom.dataset import Dataset, FileMetaDataset
    from pydicom.uid import UID, ExplicitVRLittleEndian, generate_uid

    ds = Dataset()
    ds.file_meta = FileMetaDataset()
    ds.file_meta.TransferSyntaxUID = UID(syntax) if syntax else ExplicitVRLittleEndian
    ds.file_meta.MediaStorageSOPClassUID = UID(sop_class)
    ds.file_meta.MediaStorageSOPInstanceUID = generate_uid()
    ds.SOPClassUID = ds.file_meta.MediaStorageSOPClassUID
    ds.SOPInstanceUID = ds.file_meta.MediaStorageSOPInstanceUID
    ds.StudyInstanceUID, ds.SeriesInstanceUID = generate_uid(), generate_uid()
    ds.Modality = "DX"
    ds.Rows, ds.Columns = rows, columns
    ds.SamplesPerPixel, ds.PhotometricInterpretation = 1, "MONOCHROME2"
    ds.BitsAllocated = bits
    ds.BitsStored = stored if stored is not None else bits
    ds.HighBit = ds.BitsStored - 1
    ds.PixelRepresentation = 0
    return ds


def dx_bytes(pixels: np.ndarray, *, sop_class: str = DX_SOP_CLASS, **attributes: str) -> bytes:
    """A DICOM file, 16 bits allocated and 12 stored, holding `pixels` (uint16) uncompressed;
    `attributes` set more header keywords (e.g. AccessionNumber, StudyInstanceUID)."""
    ds = dx_dataset(
        int(pixels.shape[0]), int(pixels.shape[1]), bits=16, stored=12, sop_class=sop_class
    )
    for keyword, value in attributes.items():
        setattr(ds, keyword, value)
    ds.PixelData = pixels.astype("<u2").tobytes()
    buffer = io.BytesIO()
    ds.save_as(buffer, enforce_file_format=True)
    return buffer.getvalue()
