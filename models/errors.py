"""Exceptions raised by `models`.

`ImageError` is the one base class the service maps to an HTTP status; every
subclass names the input, the bad value, the expected range and the remedy.
"""

from __future__ import annotations

__all__ = [
    "CheckpointError",
    "CorruptImageError",
    "DatasetError",
    "DecoderFailedError",
    "ImageError",
    "ImageTooComplexError",
    "ImageTooLargeError",
    "InvalidDicomError",
    "MissingPixelData",
    "ModelsError",
    "PreparedCacheError",
    "UnsupportedImageError",
    "UnsupportedTransferSyntax",
]


class ImageError(ValueError):
    """Base class: an input image cannot be read or is not a chest radiograph we can handle."""


class InvalidDicomError(ImageError):
    """The input is not a DICOM file, or it is truncated/corrupt."""


class UnsupportedTransferSyntax(ImageError):
    """The pixel data uses a transfer syntax no installed decoder handles."""


class MissingPixelData(ImageError):
    """The DICOM dataset has no pixel data (e.g. a structured report or presentation state)."""


class CorruptImageError(ImageError):
    """A PNG, JPEG or TIFF whose header reads but whose data is truncated or corrupt."""


class UnsupportedImageError(ImageError):
    """Readable, but not something the model accepts (CT/MR, multi-frame, colour palette, tiny)."""


class ImageTooLargeError(UnsupportedImageError):
    """The image dimensions exceed the safety limit (guards memory and decode time)."""


class ImageTooComplexError(ImageTooLargeError):
    """The encoding asks for more decode work than any real image needs (a JPEG with
    thousands of scans), refused before decoding."""


class DecoderFailedError(ImageError):
    """The decoder crashed on the image, or ran past its time limit, in a decoding worker
    (which was replaced): that image's failure, not the caller's."""


class ModelsError(ValueError):
    """Base class for non-image errors of `models` (checkpoints, datasets, configs)."""


class CheckpointError(ModelsError):
    """A checkpoint is unreadable, of an unknown format, or does not match the caller."""


class DatasetError(ModelsError):
    """A training/evaluation dataset is missing files, columns or labels."""


class PreparedCacheError(DatasetError):
    """A prepared image cache (`cxr prepare`) is incomplete, or stale for the data or the
    settings it is used with."""
