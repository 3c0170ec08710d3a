"""The discrepancy worklist: batch results whose report and image disagree, their reviews,
their images and a CSV export (quality review by a radiologist)."""

from __future__ import annotations

import csv
import io
from collections.abc import Iterator
from typing import TYPE_CHECKING, Annotated, Any, Literal

import numpy as np
from fastapi import APIRouter, Path, Query, Response
from fastapi.responses import StreamingResponse
from pydantic import BaseModel, Field
from starlette.concurrency import run_in_threadpool

from app import crud
from app.db.models import BatchItem, PredictionRow
from app.deps import AppState, NlpDep, ReviewerDep, SessionDep, StateDep
from app.errors import BadCursor, ModelNotLoaded, NotFound, shown
from app.inference import PREVIEW_SIDE
from app.prediction_views import MIN_OVERLAY_SIDE, prediction_read
from app.schemas import ErrorRead, PredictionRead, ReportLabelsRead
from app.worklist import (
    REVIEW_KEY,
    CursorError,
    Decision,
    Discrepancy,
    Sort,
    discrepancies_in_result,
    list_discrepancies,
    review_dict,
)
from app.worklist_sources import read_display, read_report
from labeler import LabelerError
from models.image_pipeline import InputSpec

if TYPE_CHECKING:
    from sqlalchemy.orm import Session

    from models.predict import Prediction

router = APIRouter(tags=["discrepancies"])


JobQuery = Annotated[str | None, Query(max_length=64, description="Only this batch job.")]
LabelQuery = Annotated[str | None, Query(max_length=64, description="Only this finding.")]
UnreviewedQuery = Annotated[bool, Query(description="Only rows without a review.")]
# Batch item ids are the database's 32-bit integers (PostgreSQL INTEGER).
MAX_ID = 2**31 - 1
ItemId = Annotated[int, Path(ge=1, le=MAX_ID, description="A worklist row's `item_id`.")]


class DiscrepancyListRead(BaseModel):
    """One page of the worklist, in the order asked for."""

    # the worklist's own dataclass: one field list, validated and documented by pydantic
    items: list[Discrepancy]
    scanned: int = Field(description="Rows read for this page.")
    next_cursor: str | None = Field(
        description="Pass as `cursor` (same sort and order) for the next page; null on the "
        "last page."
    )


class ReviewCreate(BaseModel):
    """A verdict on one row: agree with the report, agree with the model, or dismiss; and/or
    a note. Both empty clears the verdict (the row is unreviewed again)."""

    decision: Decision | None = None
    note: Annotated[str | None, Field(max_length=2000)] = None


class ReviewRead(BaseModel):
    """A stored review: the verdict, the note, who (the API key's name) and when."""

    decision: str | None
    note: str | None
    reviewer: str
    reviewed_at: str


SortQuery = Annotated[
    Sort,
    Query(
        description="newest (item, newest first), finding, probability (highest first), job "
        "(newest job first) or review (unreviewed first, then by verdict)."
    ),
]
OrderQuery = Annotated[
    Literal["asc", "desc"] | None,
    Query(description="Against the sort's own direction (see `sort`) when given."),
]


@router.get(
    "/discrepancies",
    response_model=DiscrepancyListRead,
    responses={400: {"model": ErrorRead}},
    summary="List images whose report and image disagree (the worklist)",
)
def get_discrepancies(
    session: SessionDep,
    job_id: JobQuery = None,
    label: LabelQuery = None,
    unreviewed: UnreviewedQuery = False,
    sort: SortQuery = "newest",
    order: OrderQuery = None,
    cursor: Annotated[
        str | None, Query(max_length=512, description="Keyset cursor: a page's `next_cursor`.")
    ] = None,
    limit: Annotated[int, Query(ge=1, le=500)] = 100,
) -> DiscrepancyListRead:
    """From batch jobs that had both a report and a model: per image and finding, the
    report's status (and side, when stored) beside the model's decision, probability,
    threshold and boxes placed in the patient, one sentence saying how they disagree, and
    the row's review. Filtered, sorted and paged in the database (keyset paging): follow
    `next_cursor` with the same sort and order to read every row."""
    crud.index_worklist(session)  # results stored before the worklist had rows
    try:
        page = list_discrepancies(
            session,
            job_id=job_id,
            label=label,
            unreviewed=unreviewed,
            sort=sort,
            descending=None if order is None else order == "desc",
            cursor=cursor,
            limit=limit,
        )
    except CursorError as exc:
        raise BadCursor(str(exc)) from None
    return DiscrepancyListRead(items=page.items, scanned=page.scanned, next_cursor=page.next_cursor)


CSV_COLUMNS = (
    "job_id",
    "item_id",
    "item",
    "study_instance_uid",
    "accession_number",
    "sop_instance_uid",
    "view_position",
    "label",
    "report_status",
    "report_laterality",
    "model_decision",
    "model_probability",
    "model_threshold",
    "model_side",
    "reason",
    "review_decision",
    "review_note",
    "reviewer",
    "reviewed_at",
)


def _csv_row(d: Discrepancy) -> list[Any]:
    review = d.review or {}
    return [
        d.job_id,
        d.item_id,
        d.item,
        d.study_instance_uid,
        d.accession_number,
        d.sop_instance_uid,
        d.view_position,
        d.label,
        d.report.get("status"),
        d.report.get("laterality"),
        "positive" if d.image.get("positive") else "negative",
        d.image.get("probability"),
        d.image.get("threshold"),
        d.image.get("side"),
        d.reason,
        review.get("decision"),
        review.get("note"),
        review.get("reviewer"),
        review.get("reviewed_at"),
    ]


@router.get(
    "/discrepancies.csv",
    response_class=StreamingResponse,
    responses={200: {"content": {"text/csv": {}}}},
    summary="The whole worklist with its reviews as CSV",
)
def export_discrepancies(
    state: StateDep,
    job_id: JobQuery = None,
    label: LabelQuery = None,
    unreviewed: UnreviewedQuery = False,
    sort: SortQuery = "newest",
    order: OrderQuery = None,
) -> StreamingResponse:
    """Every row (all pages, same filters and sort as the list), one CSV line each, with its
    review."""

    def lines() -> Iterator[bytes]:
        buffer = io.StringIO()
        writer = csv.writer(buffer)
        writer.writerow(CSV_COLUMNS)
        cursor: str | None = None
        with state.sessions() as session:
            crud.index_worklist(session)
        while True:
            with state.sessions() as session:
                page = list_discrepancies(
                    session,
                    job_id=job_id,
                    label=label,
                    unreviewed=unreviewed,
                    sort=sort,
                    descending=None if order is None else order == "desc",
                    cursor=cursor,
                    limit=500,
                )
            for d in page.items:
                writer.writerow(_csv_row(d))
            yield buffer.getvalue().encode("utf-8")
            buffer.seek(0)
            buffer.truncate()
            if page.next_cursor is None:
                return
            cursor = page.next_cursor

    return StreamingResponse(
        lines(),
        media_type="text/csv; charset=utf-8",
        headers={"Content-Disposition": 'attachment; filename="worklist.csv"'},
    )


def _row_item(session: Session, item_id: int, label: str | None = None) -> BatchItem:
    item = crud.get_batch_item(session, item_id)
    if item is None or not isinstance(item.result, dict):
        raise NotFound(f"no batch result {item_id}")
    if label is not None:
        labels = {d.label for d in discrepancies_in_result(item.result)}
        if label not in labels:
            raise NotFound(
                f"batch result {item_id} has no worklist row for {shown(label)}; its rows: "
                + (", ".join(sorted(labels)) or "none")
            )
    return item


@router.put(
    "/discrepancies/items/{item_id}/reviews/{label}",
    response_model=ReviewRead,
    responses={404: {"model": ErrorRead}},
    summary="Review one worklist row",
)
def put_review(
    item_id: ItemId,
    label: Annotated[str, Path(max_length=64)],
    body: ReviewCreate,
    session: SessionDep,
    reviewer: ReviewerDep,
) -> ReviewRead:
    """Record the verdict and note on one row (image and finding), with who (the API key's
    name) and when; replaces the row's earlier review."""
    item = _row_item(session, item_id, label)
    note = body.note.strip() if body.note else None
    review = crud.save_review(
        session, item=item, label=label, decision=body.decision, note=note, reviewer=reviewer
    )
    return ReviewRead(**review_dict(review))  # type: ignore[arg-type]


class RowReportRead(BaseModel):
    """A row's report, read again from the job's source and labeled now (batch results keep
    no report text), or why it cannot be read."""

    item_id: int
    label: str = Field(description="The row's finding: its evidence is `labels.mentions` of it.")
    origin: str | None = Field(description="Where the text was read: the reports CSV or the SR.")
    text: str | None = Field(description="The report's text; null when `missing`.")
    missing: str | None = Field(description="Why the text cannot be read now; null when read.")
    status: str | None = Field(description="The finding's status as the batch labeled it.")
    labels: ReportLabelsRead | None = Field(
        description="The labeler's output on the text read now: mentions with their offsets."
    )
    changed: bool = Field(
        description="The text read now labels the finding otherwise than the batch did (the "
        "report was changed since)."
    )


@router.get(
    "/discrepancies/items/{item_id}/report",
    response_model=RowReportRead,
    responses={404: {"model": ErrorRead}},
    summary="A worklist row's report, re-read from the job's source, with its evidence",
)
async def get_item_report(
    item_id: ItemId,
    label: Annotated[str, Query(max_length=64, description="The row's finding.")],
    session: SessionDep,
    labeler: NlpDep,
) -> RowReportRead:
    """The report text the batch labeled for this image, read again from the reports CSV or
    the structured report it came from, labeled now: the page highlights the finding's
    evidence in it. Nothing of it is stored. When the source is gone (an uploaded zip's
    files are deleted when the job ends), `missing` says so."""
    item = await run_in_threadpool(_row_item, session, item_id, label)
    report = (item.result or {}).get("report") or {}
    status = (report.get("labels") or {}).get(label)
    found = await run_in_threadpool(read_report, session, item.job, item)
    if found.text is None:
        return RowReportRead(
            item_id=item_id,
            label=label,
            origin=found.origin,
            text=None,
            missing=found.missing,
            status=status,
            labels=None,
            changed=False,
        )
    try:
        result = await labeler.label_async(found.text, report_id=str(item_id))
    except LabelerError as exc:
        return RowReportRead(
            item_id=item_id,
            label=label,
            origin=found.origin,
            text=None,
            missing=f"The report was read but cannot be labeled: {exc}",
            status=status,
            labels=None,
            changed=False,
        )
    return RowReportRead(
        item_id=item_id,
        label=label,
        origin=found.origin,
        text=found.text,
        missing=None,
        status=status,
        labels=ReportLabelsRead(**result.to_dict(), labeler_version=labeler.version),
        changed=result.labels.get(label) != status,
    )


def _review_keys(item: BatchItem) -> dict[str, str]:
    keys = (item.result or {}).get(REVIEW_KEY)
    if not isinstance(keys, dict) or not keys.get("preview") or not keys.get("input"):
        raise NotFound(
            f"batch result {item.id} kept no image (only images with a disagreement found "
            "by a job with a model are kept)"
        )
    return {k: str(v) for k, v in keys.items()}


@router.get(
    "/discrepancies/items/{item_id}/image.png",
    response_class=Response,
    responses={200: {"content": {"image/png": {}}}, 404: {"model": ErrorRead}},
    summary="The kept image of a worklist row (thumbnail or preview)",
)
async def get_item_image(
    item_id: ItemId,
    session: SessionDep,
    state: StateDep,
    max_size: Annotated[int, Query(ge=MIN_OVERLAY_SIDE, le=PREVIEW_SIDE)] = PREVIEW_SIDE,
) -> Response:
    """The grey image the batch read, at most `max_size` pixels a side."""
    item = await run_in_threadpool(_row_item, session, item_id)
    key = _review_keys(item)["preview"]
    png = await run_in_threadpool(_resized_png, state.storage.get_bytes(key), max_size)
    return Response(png, media_type="image/png", headers={"Cache-Control": "private, max-age=3600"})


def _resized_png(png: bytes, max_size: int) -> bytes:
    import cv2
    import numpy as np

    from app.inference import decode_preview
    from models.transforms import fit_long_side

    grey = decode_preview(png)
    if max(grey.shape) <= max_size:
        return png
    small = fit_long_side(grey.astype(np.float32) / 255.0, max_size)
    ok, out = cv2.imencode(".png", (np.clip(small, 0, 1) * 255 + 0.5).astype(np.uint8))
    if not ok:  # pragma: no cover - encoding a uint8 array does not fail
        raise RuntimeError("PNG encoding failed")
    return bytes(out.tobytes())


@router.post(
    "/discrepancies/items/{item_id}/prediction",
    response_model=PredictionRead,
    responses={404: {"model": ErrorRead}, 503: {"model": ErrorRead}},
    summary="Open a worklist row's image: its prediction with every heatmap",
)
async def open_item(item_id: ItemId, session: SessionDep, state: StateDep) -> PredictionRead:
    """Predict the model input the batch kept for this image again, with a heatmap for every
    finding (the disagreement may be one the model calls negative), and store it as a
    prediction whose image, heatmaps and boxes the page shows. The probabilities are the
    batch's own when the service runs the model the job ran. The image is shown at display
    size when the job's folder still holds the very file (else at the model's input size),
    and a row opened again by the same model reuses its stored prediction."""
    from app.review_images import decode_model_input

    predictor = state.predictor
    if predictor is None:
        raise ModelNotLoaded()
    item = await run_in_threadpool(_row_item, session, item_id)
    keys = _review_keys(item)
    card = predictor.run_card
    # the kept model input's hash names the opened image (the batch's file is not kept)
    sha256 = keys["input"][:64]
    stored = await run_in_threadpool(crud.find_prediction, session, image_sha256=sha256, card=card)
    if stored is not None:
        return prediction_read(stored)
    prepared = decode_model_input(state.storage.get_bytes(keys["input"]))
    spec = InputSpec.of(predictor, max_pixels=state.settings.max_pixels)
    display = await run_in_threadpool(read_display, item.job, item, prepared, spec)
    (prediction,) = await run_in_threadpool(predictor.predict, [prepared], heatmaps="all")
    result = dict(item.result or {})
    row = await run_in_threadpool(_store, state, result, keys, card, prediction, display)
    return prediction_read(row)


def _store(
    state: AppState,
    result: dict[str, Any],
    keys: dict[str, str],
    card: dict[str, Any],
    prediction: Prediction,
    display: np.ndarray | None,
) -> PredictionRow:
    from app.inference import encode_heatmaps, encode_preview
    from models.dicom import ImageMeta

    meta = ImageMeta(
        study_instance_uid=result.get("study_instance_uid"),
        series_instance_uid=result.get("series_instance_uid"),
        sop_instance_uid=result.get("sop_instance_uid"),
        sop_class_uid=result.get("sop_class_uid"),
        modality=result.get("modality"),
        rows=int(result.get("rows") or 0),
        columns=int(result.get("columns") or 0),
    )
    heatmaps_key = (
        state.storage.put_bytes(encode_heatmaps(prediction.heatmaps), ".npz")
        if prediction.heatmaps
        else None
    )
    pixels_key = (
        state.storage.put_bytes(encode_preview(display), ".png")
        if display is not None
        else keys["preview"]
    )
    with state.sessions() as session:
        study = (
            crud.get_or_create_study(session, meta.study_instance_uid)
            if meta.study_instance_uid
            else None
        )
        image = crud.create_image(
            session,
            sha256=keys["input"][:64],
            meta=meta,
            study=study,
            pixels_key=pixels_key,
            upload_key=None,
        )
        row = crud.store_prediction(
            session, image=image, card=card, prediction=prediction, heatmaps_key=heatmaps_key
        )
        return row
