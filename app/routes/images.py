"""POST /v1/images/predict: classify and localize findings on one radiograph."""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Awaitable
from typing import TYPE_CHECKING, Any, TypeVar, cast

from fastapi import APIRouter, Request
from starlette.concurrency import run_in_threadpool

from app import crud
from app.deps import AppState, InferenceDep, StateDep
from app.image_intake import Upload, decode_upload, received_upload
from app.inference import PREVIEW_SIDE, encode_preview
from app.prediction_views import prediction_read
from app.schemas import ErrorRead, PredictionRead

if TYPE_CHECKING:
    from app.db.models import PredictionRow
    from models.dicom import ImageMeta
    from models.predict import Prediction

A = TypeVar("A")
B = TypeVar("B")

router = APIRouter(tags=["images"])
log = logging.getLogger(__name__)


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
        503: {
            "model": ErrorRead,
            "description": "No model loaded (says how to get one), or too many uploads "
            "waiting to be decoded (in all, or from this client).",
        },
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
    async with received_upload(request, state.storage.tmp_dir()) as upload:
        digest = upload.digest()  # computed while the image is decoded and predicted
        received = time.perf_counter()
        loaded = await decode_upload(
            request,
            inference,
            upload,
            display_size=PREVIEW_SIDE,
            max_pixels=state.settings.max_pixels,
        )
        meta, prepared, display = loaded.meta, loaded.prepared, loaded.display
        assert display is not None  # decode_upload always makes the display copy
        del loaded
        decoded = time.perf_counter()
        # The preview PNG is encoded in a thread while the model runs: off the critical path.
        prediction, preview_png = await _both(
            inference.predict(prepared), run_in_threadpool(encode_preview, display)
        )
        del prepared, display
        predicted = time.perf_counter()
        sha256 = await digest
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
        return crud.store_prediction(
            session,
            image=row,
            card=state.predictor.run_card if state.predictor is not None else {},
            prediction=prediction,
            heatmaps_key=heatmaps_key,
        )
