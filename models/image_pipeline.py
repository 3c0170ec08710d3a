"""The one image path's CPU side: a file in, the model's input and a display copy out.

    spec = InputSpec.of(predictor)                 # size and resize mode from the card
    loaded = load_for_model("study.dcm", spec)     # decode -> fit -> display copy
    [prediction] = predictor.predict([loaded.prepared])

Every caller that predicts from a file goes through `load_for_model`: `cxr predict`
(in a pool of worker processes, `models.decode_pool`), the service's upload route, batch
jobs and `cxr evaluate`'s localization. The full-resolution image lives only inside it;
what comes out is the fitted image as 16-bit grey (2 MB at 1024 px, padded on the device
by `models.predict`) and, when asked for, an 8-bit display copy. Where the model runs on a
GPU, `cxr predict`'s workers only read (`read_task`): the stored codes go to the device,
which fits them there (`Predictor.stage`), and the workers' cores are free for reading.

Nothing here imports torch, so decoding workers stay small.
"""

from __future__ import annotations

import hashlib
import os
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, BinaryIO, Literal, Protocol

import numpy as np

from models.dicom import ImageMeta
from models.geometry import Geometry, ResizeMode
from models.stored_pixels import UNIT_CODES, StoredPixels

if TYPE_CHECKING:  # decoding workers never import torch
    import torch

__all__ = [
    "DecodeTask",
    "InputSpec",
    "LoadedImage",
    "OpenFile",
    "PreparedImage",
    "UploadTask",
    "display_copy",
    "fit_read",
    "load_for_model",
    "load_task",
    "load_upload_task",
    "read_task",
    "ReadImage",
    "prepare_pixels",
    "read_stored",
]

ImageSource = str | os.PathLike[str] | bytes | BinaryIO
SourceKind = Literal["auto", "dicom", "bitmap"]


@dataclass(frozen=True)
class PreparedImage:
    """An image fitted to the model input (its part only) and the geometry that maps it back.

    Attributes:
        pixels: (geometry.height, geometry.width) grey: uint16 (times `UNIT_CODES`, what
            `load_for_model` makes) or float32 in [0, 1]; the padding is added on the device.
        geometry: original size and placement in the (S, S) input.
    """

    pixels: np.ndarray
    geometry: Geometry


class _HasCard(Protocol):
    @property
    def image_size(self) -> int: ...

    @property
    def resize(self) -> ResizeMode: ...


@dataclass(frozen=True)
class InputSpec:
    """What fitting an image for a model needs (picklable, for worker processes).

    Attributes:
        size: the model input side S.
        resize: "letterbox" or "stretch".
        display_size: longer side of the 8-bit display copy (None: no copy).
        max_pixels: refuse larger images before decoding (None: only the per-side limit).
        fingerprint: also digest the model input (`LoadedImage.fingerprint`), so a batch
            can tell a second copy of an instance from another image with its UID.
    """

    size: int
    resize: ResizeMode
    display_size: int | None = None
    max_pixels: int | None = None
    fingerprint: bool = False  # last: positional constructions keep their meaning

    @classmethod
    def of(
        cls,
        predictor: _HasCard,
        *,
        display_size: int | None = None,
        max_pixels: int | None = None,
    ) -> InputSpec:
        """The spec of a `models.predict.Predictor` (its card's size and resize mode)."""
        return cls(predictor.image_size, predictor.resize, display_size, max_pixels)


@dataclass
class LoadedImage:
    """One decoded file, reduced to what prediction and display need.

    Attributes:
        meta: image facts (identifiers, size, view position).
        prepared: the model input.
        display: uint8 grey copy, longer side at most the spec's `display_size` (None when
            not asked for).
        timings: seconds for "decode" and "preprocess".
        fingerprint: a digest of the model input (32 hex digits) when the spec asked for
            it, else None.
    """

    meta: ImageMeta
    prepared: PreparedImage
    display: np.ndarray | None = None
    timings: dict[str, float] = field(default_factory=dict)
    fingerprint: str | None = None


def read_stored(
    source: ImageSource,
    *,
    filename: str | None = None,
    max_pixels: int | None = None,
    kind: SourceKind = "auto",
) -> tuple[StoredPixels, ImageMeta]:
    """Decode a DICOM or bitmap into `StoredPixels` (no full-size float image).

    Args:
        source: a path, the file's bytes, or a seekable binary stream.
        filename: the name in error messages for bytes and streams.
        max_pixels: refuse an image of more pixels, before decoding.
        kind: "dicom" reads DICOM only (a batch item known to be one); "auto" sniffs.

    Raises:
        ImageError: (a subclass) unreadable, unsupported or too large.
    """
    from models.dicom import read_dicom_stored
    from models.images import load_image, load_integer_image, looks_like_dicom

    name = filename or (str(source) if isinstance(source, str | os.PathLike) else None)
    if kind == "dicom" or (kind == "auto" and looks_like_dicom(source)):
        return read_dicom_stored(source, max_pixels=max_pixels, name=name)
    if isinstance(source, bytes | str | os.PathLike):
        image = load_integer_image(source, filename=name, max_pixels=max_pixels)
        codes, low, high = image.pixels, image.low, image.high
    else:  # an upload's spooled stream: decoded from the stream, never read whole first
        grey = load_image(source, filename=name, max_pixels=max_pixels).pixels
        codes = (np.clip(grey, 0.0, 1.0) * 65535.0 + 0.5).astype(np.uint16)
        low, high = 0.0, 65535.0
    rows, columns = codes.shape
    bits = 8 * codes.dtype.itemsize
    meta = ImageMeta(rows=rows, columns=columns, bits_stored=bits, photometric="MONOCHROME2")
    return StoredPixels.linear(codes, low, high), meta


def load_for_model(
    source: ImageSource,
    spec: InputSpec,
    *,
    filename: str | None = None,
    kind: SourceKind = "auto",
    device: torch.device | None = None,
) -> LoadedImage:
    """Decode, fit into the model input and make the display copy; drop the rest.

    Args:
        device: a CUDA device to shrink the image on (`models.device_fit.fit_stored`): the
            service, which decodes one upload at a time beside a GPU; None fits on the host.

    Raises:
        ImageError: (a subclass) unreadable, unsupported or too large.
    """
    t0 = time.perf_counter()
    stored, meta = read_stored(source, filename=filename, max_pixels=spec.max_pixels, kind=kind)
    return fit_read(
        ReadImage(meta, stored, timings={"decode": time.perf_counter() - t0}), spec, device
    )


def fit_read(image: ReadImage, spec: InputSpec, device: torch.device | None = None) -> LoadedImage:
    """The second half of `load_for_model`: fit a decoded image (read here or in a worker)
    into the model input and make the display copy, on `device` if given."""
    t1 = time.perf_counter()
    stored = image.stored
    if device is None:
        fitted, geometry = stored.fit(spec.size, spec.resize)
    else:
        # Lazy: decoding workers never import torch; a caller with a device has it already.
        from models.device_fit import fit_stored

        fitted, geometry = fit_stored(stored, spec.size, spec.resize, device)
    display = None
    if spec.display_size is not None:
        display = display_copy(stored, spec.display_size, fitted, geometry)
    del stored
    prepared = PreparedImage(fitted, geometry)
    return LoadedImage(
        meta=image.meta,
        prepared=prepared,
        display=display,
        timings={"decode": image.timings["decode"], "preprocess": time.perf_counter() - t1},
        fingerprint=_input_fingerprint(prepared) if spec.fingerprint else None,
    )


def _input_fingerprint(prepared: PreparedImage) -> str:
    """The model input's digest: SHA-256 (first 32 hex digits) of the geometry and of the
    fitted pixels as C-contiguous little-endian uint16 (what `load_for_model` makes).

    Two files whose model input is bit-identical give the same prediction and the same
    training image, whatever their transfer syntax: a batch uses it, with the SOP Instance
    UID, to skip the second copy of an instance. It is computed where the image is decoded
    (a worker process for batches), about 1 ms at 1024 px, so the main process never
    hashes pixels.
    """
    g = prepared.geometry
    digest = hashlib.sha256()
    # The whole geometry: the original size and input side, and where the fitted part
    # lies (the same pixel bytes in another shape are another input).
    digest.update(np.array(list(g.to_dict().values()), dtype="<i8").tobytes())
    digest.update(np.ascontiguousarray(prepared.pixels, dtype="<u2").tobytes())
    return digest.hexdigest()[:32]


DecodeTask = tuple[str, InputSpec, SourceKind]


def load_task(task: DecodeTask) -> LoadedImage:
    """`load_for_model` on one (path, spec, kind) task: the decoding workers' job.

    It lives here, not beside its callers, because a worker imports the module of the
    function it is sent: from here that is numpy, OpenCV and pydicom (already in the fork
    server), not torch and the model code (about 2 s and 200 MB per worker).
    """
    path, spec, kind = task
    return load_for_model(path, spec, kind=kind)


@dataclass
class ReadImage:
    """One decoded file before its fit (`read_task`): what a device that fits needs.

    Attributes:
        meta: image facts (identifiers, size, view position).
        stored: the stored codes and their per-code grey (`StoredPixels.fit` fits them).
        display: uint8 grey copy, longer side at most the spec's `display_size` (None when
            not asked for).
        timings: seconds for "decode" (and "preprocess": the display copy).
    """

    meta: ImageMeta
    stored: StoredPixels
    display: np.ndarray | None = None
    timings: dict[str, float] = field(default_factory=dict)


def read_task(task: DecodeTask) -> ReadImage:
    """`read_stored` on one (path, spec, kind) task, and the display copy if the spec asks
    for one, but no fit: the decoding workers' job when the model's device fits the
    images (`models.predict.predict_files` on CUDA)."""
    path, spec, kind = task
    t0 = time.perf_counter()
    stored, meta = read_stored(path, max_pixels=spec.max_pixels, kind=kind)
    t1 = time.perf_counter()
    timings = {"decode": t1 - t0}
    display = None
    if spec.display_size is not None:
        display = display_copy(stored, spec.display_size)
        timings["preprocess"] = time.perf_counter() - t1
    return ReadImage(meta, stored, display, timings)


class OpenFile:
    """An open file handed to a decoding worker, which gets a duplicate of its descriptor:
    a file with no name on disk (the service's spooled upload) is read in place, never
    copied through the pipe. The worker closes its duplicate; the caller keeps its own."""

    def __init__(self, fd: int) -> None:
        self.fd = fd

    def __reduce__(self) -> tuple[Callable[[_Detachable], OpenFile], tuple[object]]:
        from multiprocessing.reduction import DupFd

        return _attach_open_file, (DupFd(self.fd),)


class _Detachable(Protocol):
    def detach(self) -> int: ...


def _attach_open_file(fd: _Detachable) -> OpenFile:
    return OpenFile(fd.detach())


# (the open file, its name in messages, the spec, fit it here: else the caller's device does)
UploadTask = tuple[OpenFile, str, InputSpec, bool]


def load_upload_task(task: UploadTask) -> LoadedImage | ReadImage:
    """An upload in a decoding worker (the service's upload route): `load_for_model` on the open
    file, or `read_stored` alone when the caller fits on its GPU (`fit_read`)."""
    shared, name, spec, fit = task
    # The duplicate shares the caller's file offset; the caller waits for this result.
    with os.fdopen(shared.fd, "rb") as file:
        file.seek(0)
        if fit:
            return load_for_model(file, spec, filename=name)
        t0 = time.perf_counter()
        stored, meta = read_stored(file, filename=name, max_pixels=spec.max_pixels)
        return ReadImage(meta, stored, timings={"decode": time.perf_counter() - t0})


def display_copy(
    stored: StoredPixels,
    side: int,
    fitted: np.ndarray | None = None,
    geometry: Geometry | None = None,
) -> np.ndarray:
    """uint8 grey, longer side at most `side`, aspect ratio kept.

    The model input is reused when it is that same letterboxed size (a 1024 px model and
    a 1024 px display): one resize of the full image instead of two.
    """
    rows, columns = stored.shape
    if max(rows, columns) <= side:
        small = stored.fit(max(rows, columns), "letterbox")[0]
    else:
        target = Geometry.fit(rows, columns, side, "letterbox")
        same = (
            fitted is not None
            and geometry is not None
            and (geometry.height, geometry.width) == (target.height, target.width)
        )
        small = fitted if same and fitted is not None else stored.fit(side, "letterbox")[0]
    out: np.ndarray = ((small.astype(np.uint32) * 255 + UNIT_CODES // 2) // UNIT_CODES).astype(
        np.uint8
    )
    return out


def prepare_pixels(pixels: np.ndarray, size: int, resize: ResizeMode) -> PreparedImage:
    """Fit an already decoded float (rows, columns) image in [0, 1] (callers holding one).

    Raises:
        ValueError: not a 2-D array.
    """
    from models.transforms import fit_square

    if np.ndim(pixels) != 2:
        raise ValueError(f"expected a (rows, columns) image, got shape {np.shape(pixels)}")
    fitted, geometry = fit_square(pixels, size, resize)
    g = geometry
    content = fitted[g.top : g.top + g.height, g.left : g.left + g.width]
    return PreparedImage(np.ascontiguousarray(content, np.float32), geometry)
