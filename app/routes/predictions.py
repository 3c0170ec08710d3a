"""GET /v1/predictions/{id} and its heatmap overlays."""

from __future__ import annotations

from typing import Annotated, Any

from fastapi import APIRouter, Query, Response
from starlette.concurrency import run_in_threadpool

from app import crud
from app.deps import SessionDep, StorageDep
from app.errors import NotFound, shown
from app.inference import PREVIEW_SIDE
from app.prediction_views import MIN_OVERLAY_SIDE, prediction_read
from app.schemas import ErrorRead, PredictionRead
from app.storage import Storage
from models.boxes import Box

router = APIRouter(tags=["predictions"])


@router.get(
    "/predictions/{prediction_id}/image.png",
    response_class=Response,
    responses={
        200: {"content": {"image/png": {}}, "description": "The radiograph as the model saw it."},
        404: {"model": ErrorRead},
    },
    summary="The radiograph of a prediction, without overlay",
)
def get_prediction_image(prediction_id: str, session: SessionDep, storage: StorageDep) -> Response:
    """The stored 8-bit preview (windowed as for the model, at most 1024 px a side): the
    base layer on which a viewer draws heatmaps and boxes."""
    row = crud.get_prediction(session, prediction_id)
    if row is None:
        raise NotFound(f"no prediction {shown(prediction_id)}")
    if row.image.pixels_key is None:
        raise NotFound("the image preview for this prediction is not stored")
    return Response(
        storage.get_bytes(row.image.pixels_key),
        media_type="image/png",
        headers={"Cache-Control": "private, max-age=3600"},
    )


@router.get(
    "/predictions/{prediction_id}",
    response_model=PredictionRead,
    responses={404: {"model": ErrorRead}},
    summary="A stored prediction",
)
def get_prediction(prediction_id: str, session: SessionDep) -> PredictionRead:
    """The prediction as returned by POST /v1/images/predict."""
    row = crud.get_prediction(session, prediction_id)
    if row is None:
        raise NotFound(f"no prediction {shown(prediction_id)}")
    return prediction_read(row)


@router.get(
    "/predictions/{prediction_id}/heatmaps/{label}.png",
    response_class=Response,
    responses={
        200: {"content": {"image/png": {}}, "description": "Heatmap overlay with boxes."},
        404: {"model": ErrorRead},
    },
    summary="Heatmap overlay PNG for one label",
)
async def get_heatmap(
    prediction_id: str,
    label: str,
    session: SessionDep,
    storage: StorageDep,
    max_size: Annotated[
        int,
        Query(
            ge=MIN_OVERLAY_SIDE,
            le=PREVIEW_SIDE,
            description="Longer side of the PNG in pixels (the stored preview is at most "
            f"{PREVIEW_SIDE}).",
        ),
    ] = PREVIEW_SIDE,
    draw_boxes: Annotated[
        bool,
        Query(
            alias="boxes",
            description="Draw the label's boxes (default); false for the heatmap alone, "
            "e.g. under a viewer's own box layer (the web page).",
        ),
    ] = True,
) -> Response:
    """The radiograph with the label's heatmap and boxes drawn on it, rendered now from
    the stored map-resolution heatmap at display size (at most `max_size` px a side)."""
    row = await run_in_threadpool(crud.get_prediction, session, prediction_id)
    if row is None:
        raise NotFound(f"no prediction {shown(prediction_id)}")
    if label not in row.heatmap_labels or row.heatmaps_key is None:
        available = ", ".join(row.heatmap_labels) or "none (no positive finding)"
        raise NotFound(f"no heatmap for {shown(label)} in this prediction; available: {available}")
    pixels_key = row.image.pixels_key
    if pixels_key is None:
        raise NotFound("the image preview for this prediction is not stored")
    boxes = [b for b in row.boxes if b.get("label") == label] if draw_boxes else []
    original = (row.image.rows, row.image.columns)
    labels = [str(x) for x in (row.model_card or {}).get("labels") or row.probabilities]
    png = await run_in_threadpool(
        _render, storage, pixels_key, row.heatmaps_key, label, boxes, labels, original, max_size
    )
    return Response(png, media_type="image/png", headers={"Cache-Control": "private, max-age=3600"})


def _render(
    storage: Storage,
    pixels_key: str,
    heatmaps_key: str,
    label: str,
    boxes: list[dict[str, Any]],
    labels: list[str],
    original: tuple[int, int],
    max_size: int,
) -> bytes:
    from app.inference import decode_heatmap, decode_preview
    from models.overlay import render_overlay

    preview = decode_preview(storage.get_bytes(pixels_key))
    heat = decode_heatmap(storage.get_bytes(heatmaps_key), label)
    drawn = [Box.from_dict(b) for b in boxes]
    return render_overlay(
        preview, heat, boxes=drawn, labels=labels, original_size=original, max_side=max_size
    )
