"""POST /v1/images/predict: classify and localize findings on one radiograph."""

from __future__ import annotations

import asyncio
import contextlib
import hashlib
import logging
import os
import tempfile
import time
from collections.abc import AsyncIterator, Awaitable
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, BinaryIO, TypeVar, cast

from fastapi import APIRouter, Request
from starlette.concurrency import run_in_threadpool
from starlette.datastructures import UploadFile

from app import crud
from app.deps import AppState, InferenceDep, StateDep
from app.errors import EmptyUpload, UnsupportedMediaType
from app.inference import PREVIEW_SIDE, encode_preview
from app.routes.predictions import prediction_read
from app.schemas import ErrorRead, PredictionRead

if TYPE_CHECKING:
    import numpy as np

    from app.db.models import PredictionRow
    from models.dicom import ImageMeta
    from models.image_pipeline import PreparedImage
    from models.predict import Prediction, Predictor
    from models.upload_decoding import UploadDecoders

A = TypeVar("A")
B = TypeVar("B")

router = APIRouter(tags=["images"])
_CHUNK = 1 << 20
log = logging.getLogger(__name__)

_RAW_TYPES = {
    "application/dicom",
    "application/octet-stream",
    "image/png",
    "image/jpeg",
    "image/tiff",
    "",
}


@dataclass
class Upload:
    """An uploaded file, spooled to disk while it waits (issue 18 item 13), never whole in
    memory: `file` is positioned at its start.

    Attributes:
        sha256: its digest, computed on a thread from the file's descriptor (which leaves
            the position to the decoder) while the image is decoded and predicted: off the
            request's critical path (5-7 ms for a 10 MiB DICOM).
    """

    file: BinaryIO
    name: str
    size: int
    sha256: asyncio.Future[str]


def _file_digest(fd: int, size: int) -> str:
    """SHA-256 of a file's first `size` bytes, read with `os.pread` (no shared position);
    closes `fd`."""
    try:
        digest = hashlib.sha256()
        offset = 0
        while offset < size:
            chunk = os.pread(fd, min(_CHUNK, size - offset), offset)
            if not chunk:
                break
            digest.update(chunk)
            offset += len(chunk)
        return digest.hexdigest()
    finally:
        os.close(fd)


@contextlib.asynccontextmanager
async def _received_upload(request: Request, state: AppState) -> AsyncIterator[Upload]:
    """The request's file, spooled to an unnamed temporary file (gone when closed)."""
    content_type = request.headers.get("content-type", "").split(";")[0].strip().lower()
    async with contextlib.AsyncExitStack() as stack:
        if content_type == "multipart/form-data":
            # Starlette spools the part to a temporary file above 1 MiB.
            form = await request.form(max_files=1, max_fields=10)
            stack.push_async_callback(form.close)
            part = form.get("file")
            if not isinstance(part, UploadFile):
                raise EmptyUpload("multipart upload without a `file` field")
            file: BinaryIO = part.file
            name = part.filename or "upload"
            size = file.seek(0, os.SEEK_END)
        elif content_type in _RAW_TYPES:
            tmp_dir = state.storage.tmp_dir()
            tmp_dir.mkdir(parents=True, exist_ok=True)
            file = stack.enter_context(tempfile.TemporaryFile(dir=tmp_dir))  # noqa: SIM115
            name = "upload"
            size = 0
            async for chunk in request.stream():
                if chunk:
                    size += len(chunk)
                    # Written from the event loop: page-cache writes of at most the
                    # server's read size (64 KiB), cheaper than a thread hop per chunk.
                    file.write(chunk)
        else:
            raise UnsupportedMediaType(
                f"Content-Type {content_type!r} is not accepted; send application/dicom "
                "(or image/png, image/jpeg) as the body, or multipart/form-data with a "
                "`file` field"
            )
        if size == 0:
            raise EmptyUpload("the uploaded file is empty")
        file.seek(0)  # also flushes what was written, for the digest's reads
        # The digest reads its own duplicate of the descriptor (a small multipart part
        # still in memory is written out by `fileno()`) and closes it: the upload's file
        # may close, and its number be reused, before the thread is done.
        own = os.dup(file.fileno())
        loop = asyncio.get_running_loop()
        digest = loop.run_in_executor(None, _file_digest, own, size)
        digest.add_done_callback(_retrieved)
        yield Upload(file=file, name=name, size=size, sha256=digest)


def _retrieved(future: asyncio.Future[str]) -> None:
    """Mark an unawaited digest's error as seen (the request failed before needing it)."""
    if not future.cancelled():
        future.exception()


_OPENAPI_BODY: dict[str, Any] = {
    "requestBody": {
        "required": True,
        "content": {
            "multipart/form-data": {
                "schema": {
                    "type": "object",
                    "properties": {"file": {"type": "string", "format": "binary"}},
                    "required": ["file"],
                }
            },
            "application/dicom": {"schema": {"type": "string", "format": "binary"}},
            "image/png": {"schema": {"type": "string", "format": "binary"}},
            "image/jpeg": {"schema": {"type": "string", "format": "binary"}},
        },
    }
}


@router.post(
    "/images/predict",
    response_model=PredictionRead,
    openapi_extra=_OPENAPI_BODY,
    responses={
        413: {
            "model": ErrorRead,
            "description": "Upload over CXR_MAX_UPLOAD_MB, or image over CXR_MAX_PIXELS.",
        },
        415: {"model": ErrorRead, "description": "Not DICOM/PNG/JPEG, or an unsupported image."},
        422: {"model": ErrorRead, "description": "Corrupt DICOM, no pixel data."},
        503: {"model": ErrorRead, "description": "No model loaded (says how to get one)."},
    },
    summary="Predict findings on a chest radiograph",
)
async def predict_image(
    request: Request, state: StateDep, inference: InferenceDep
) -> PredictionRead:
    """Probabilities for every label, positives by the model card's thresholds, boxes in
    original pixel coordinates, heatmap overlay links, the model card and timings.

    Send the DICOM file as the body (`Content-Type: application/dicom`) or as the
    multipart field `file`. The study/series/SOP instance UIDs are echoed; patient
    name and other identifying tags are neither stored nor logged.
    """
    start = time.perf_counter()
    async with _received_upload(request, state) as upload:
        received = time.perf_counter()
        meta, prepared, display = await inference.decode(
            _decode,
            inference.predictor,
            upload.file,
            upload.name,
            state.settings.max_pixels,
            inference.decoders,
        )
        decoded = time.perf_counter()
        # The preview PNG is encoded in a thread while the model runs: off the critical path.
        prediction, preview_png = await _both(
            inference.predict(prepared), run_in_threadpool(encode_preview, display)
        )
        del prepared, display
        predicted = time.perf_counter()
        sha256 = await upload.sha256
        row = await run_in_threadpool(_store, state, upload, sha256, meta, preview_png, prediction)
        stored = time.perf_counter()
    state.metrics.predictions.labels("api").inc()
    timings = {
        "upload": round(received - start, 6),
        "decode": round(decoded - received, 6),
        **{k: round(float(v), 6) for k, v in prediction.timings.items()},
        "inference_total": round(predicted - decoded, 6),
        "store": round(stored - predicted, 6),
        "total": round(time.perf_counter() - start, 6),
    }
    if state.settings.log_patient_data:
        log.info("prediction %s for SOP %s", row.id, meta.sop_instance_uid)
    else:
        log.info("prediction %s (%.0f ms)", row.id, timings["total"] * 1000)
    return prediction_read(row, timings=timings)


async def _both(first: Awaitable[A], second: Awaitable[B]) -> tuple[A, B]:
    """Await two things concurrently; the first one's error wins if both fail."""
    a, b = await asyncio.gather(first, second, return_exceptions=True)
    for result in (a, b):
        if isinstance(result, BaseException):
            raise result
    return cast(A, a), cast(B, b)


def _decode(
    predictor: Predictor,
    file: BinaryIO,
    name: str,
    max_pixels: int | None,
    decoders: UploadDecoders | None,
) -> tuple[ImageMeta, PreparedImage, np.ndarray]:
    """Decode once through the image pipeline; keep only the model input and the preview's
    pixels (uint8, at most `PREVIEW_SIDE` a side).

    `models.image_pipeline.load_for_model`, as `cxr predict`, batch jobs and `cxr evaluate` use
    it, in a decoding worker (`decoders`, CXR_DECODE_IN_WORKERS) or here: the
    full-resolution image lives only inside it, so the request's peak memory is the decode
    itself. The upload is read from its spooled file by the decoder, never copied whole
    into memory.
    """
    from models.image_pipeline import InputSpec, load_for_model

    # Over CXR_MAX_PIXELS: refused from the header, before decoding (413).
    spec = InputSpec.of(predictor, display_size=PREVIEW_SIDE, max_pixels=max_pixels)
    # Beside a GPU the shrink runs there (a 2500 x 2048 DICOM: 17.6 -> 13.8 ms on an H200).
    if decoders is not None:
        loaded = decoders.load(file, name, spec, predictor.device)
    else:
        loaded = load_for_model(file, spec, filename=name, device=predictor.device)
    assert loaded.display is not None  # asked for by the spec
    return loaded.meta, loaded.prepared, loaded.display


def _store(
    state: AppState,
    upload: Upload,
    sha256: str,
    meta: ImageMeta,
    preview_png: bytes,
    prediction: Prediction,
) -> PredictionRow:
    from app.inference import encode_heatmaps

    storage = state.storage
    pixels_key = storage.put_bytes(preview_png, ".png")
    heatmaps_key = (
        storage.put_bytes(encode_heatmaps(prediction.heatmaps), ".npz")
        if prediction.heatmaps
        else None
    )
    upload_key = None
    if state.settings.store_uploads:
        upload.file.seek(0)
        upload_key = storage.put_stream(upload.file, ".dcm")
    with state.sessions() as session:
        study = (
            crud.get_or_create_study(session, meta.study_instance_uid)
            if meta.study_instance_uid
            else None
        )
        row = crud.create_image(
            session,
            sha256=sha256,
            meta=meta,
            study=study,
            pixels_key=pixels_key,
            upload_key=upload_key,
        )
        return crud.create_prediction(
            session,
            image=row,
            card=state.predictor.run_card if state.predictor is not None else {},
            probabilities=dict(prediction.probabilities),
            positive=list(prediction.positive),
            boxes=[b.to_dict() for b in prediction.boxes],
            heatmaps_key=heatmaps_key,
            heatmap_labels=list(prediction.heatmaps),
            timings={k: float(v) for k, v in prediction.timings.items()},
        )
