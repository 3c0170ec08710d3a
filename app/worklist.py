"""The discrepancy worklist: stored batch results whose report and image disagree.

Batch jobs that had both a report and a model store, per image, the report's labels and
the prediction (probabilities, positives, boxes) in `BatchItem.result`. This module reads
those results and lists, per image and finding, where the report and the image disagree on
presence or side (`batch.study_questions.discrepancy_of`). Batch results carry the report's
`findings` (side, site, size, ...), so a finding on the other side is flagged too; results
written before they did compare presence only.

Paging is keyset paging on `BatchItem.id` (newest first) in the query: a page reads items in
chunks until it has `limit` rows or has read `max_scan` items, and returns the cursor to
go on from, so every stored result can be reached however many there are. Each row carries
its review (`WorklistReview`: verdict, note, who and when) when it has one.
"""

from __future__ import annotations

from dataclasses import dataclass, fields, replace
from datetime import datetime
from typing import Any, Literal, get_args

from sqlalchemy import select
from sqlalchemy.orm import Session

from app.db.models import BatchItem, WorklistReview
from batch.study_questions import discrepancy_of
from models.boxes import Box
from models.image_findings import ImageFindings

__all__ = [
    "DECISIONS",
    "REVIEW_KEY",
    "Decision",
    "Discrepancy",
    "WorklistPage",
    "discrepancies_in_result",
    "list_discrepancies",
    "review_dict",
]

# What a radiologist can conclude about a row.
Decision = Literal["agree_report", "agree_model", "dismissed"]
DECISIONS: tuple[str, ...] = get_args(Decision)
# Where a batch result records the image kept for review (storage keys).
REVIEW_KEY = "review_image"


@dataclass(frozen=True)
class Discrepancy:
    """One finding on which one image's report and prediction disagree."""

    job_id: str
    item: str
    study_instance_uid: str | None
    accession_number: str | None
    label: str
    reason: str
    report: dict[str, object]
    image: dict[str, object]
    item_id: int = 0
    sop_instance_uid: str | None = None
    view_position: str | None = None
    # whether the image was kept for review (`GET /v1/discrepancies/items/{id}/image.png`)
    viewable: bool = False
    review: dict[str, object] | None = None

    def to_dict(self) -> dict[str, object]:
        """JSON-ready dict."""
        return {f.name: getattr(self, f.name) for f in fields(self)}


def _image_of(result: dict[str, Any]) -> ImageFindings | None:
    from models.image_findings import image_findings

    pred = result.get("prediction")
    if not isinstance(pred, dict) or not isinstance(pred.get("probabilities"), dict):
        return None
    boxes = []
    for b in pred.get("boxes") or ():
        try:
            boxes.append(
                Box(
                    str(b["label"]),
                    float(b["x"]),
                    float(b["y"]),
                    float(b["width"]),
                    float(b["height"]),
                    float(b.get("score", 0.0)),  # not from_dict: a box without score counts (0)
                )
            )
        except (KeyError, TypeError, ValueError):
            continue
    from models.dicom import ImageMeta

    meta = ImageMeta(
        rows=int(result.get("rows") or 0),
        columns=int(result.get("columns") or 0),
        view_position=result.get("view_position"),
        patient_orientation=result.get("patient_orientation"),
    )
    return image_findings(
        {str(k): float(v) for k, v in pred["probabilities"].items()},
        [str(p) for p in pred.get("positive") or ()],
        boxes,
        None,
        meta,
    )


def discrepancies_in_result(
    result: dict[str, Any], *, job_id: str = "", item: str = ""
) -> list[Discrepancy]:
    """The disagreements of one stored batch result (an image with report and prediction).

    Args:
        result: a `BatchItem.result` (or a `cxr batch` result line).
        job_id, item: copied to each entry.

    Returns:
        One entry per finding that disagrees, in label order; none when the result lacks
        the report's labels or the prediction.
    """
    report = result.get("report")
    if not isinstance(report, dict) or not isinstance(report.get("labels"), dict):
        return []
    image = _image_of(result)
    if image is None:
        return []
    findings = report.get("findings") if isinstance(report.get("findings"), dict) else {}
    pred = result.get("prediction")
    thresholds: dict[str, Any] = (
        pred["thresholds"]
        if isinstance(pred, dict) and isinstance(pred.get("thresholds"), dict)
        else {}
    )
    out = []
    for label, status in report["labels"].items():
        side = (findings or {}).get(label, {}).get("laterality") if findings else None
        why = discrepancy_of(str(status), side, image, str(label))
        if why is None:
            continue
        out.append(
            Discrepancy(
                job_id=job_id,
                item=item,
                study_instance_uid=result.get("study_instance_uid"),
                accession_number=result.get("accession_number"),
                label=str(label),
                reason=why,
                report={
                    "status": status,
                    "laterality": side,
                    "source": report.get("source"),
                    # the finding's attributes (side, site, size, ...): the report's evidence
                    # kept without its text (report text is stored only on request)
                    "finding": (findings or {}).get(label) or {},
                },
                image={
                    "probability": image.probabilities.get(str(label)),
                    "positive": str(label) in image.positive,
                    "threshold": thresholds.get(str(label)),
                    "side": image.side(str(label)),
                    "boxes": [p.to_dict() for p in image.positions if p.label == label],
                },
                sop_instance_uid=result.get("sop_instance_uid"),
                view_position=result.get("view_position"),
                viewable=isinstance(result.get(REVIEW_KEY), dict),
            )
        )
    return out


def review_dict(review: WorklistReview) -> dict[str, object]:
    """A review as the worklist shows it."""
    at: datetime = review.reviewed_at
    return {
        "decision": review.decision,
        "note": review.note,
        "reviewer": review.reviewer,
        "reviewed_at": at.isoformat(),
    }


@dataclass(frozen=True)
class WorklistPage:
    """One page of the worklist.

    Attributes:
        items: the rows, newest item first (every row of an item is on the same page).
        scanned: batch items read for this page.
        next_cursor: pass as `before` for the next page; None when every item was read.
    """

    items: list[Discrepancy]
    scanned: int
    next_cursor: int | None


_CHUNK = 200


def list_discrepancies(
    session: Session,
    *,
    job_id: str | None = None,
    label: str | None = None,
    unreviewed: bool = False,
    before: int | None = None,
    limit: int = 100,
    max_scan: int = 5000,
) -> WorklistPage:
    """One page of disagreements across batch jobs (or one job), newest item first.

    Args:
        session: a database session (read only).
        job_id: only this job's items.
        label: only rows of this finding.
        unreviewed: only rows without a review.
        before: keyset cursor: only items with a smaller id (a page's `next_cursor`).
        limit: stop once this many rows are found (an item's rows stay together, so a page
            may hold a few more).
        max_scan: stop after reading this many items (the cursor says where to go on).

    Returns:
        The page, with the cursor of its last item read.
    """
    base = select(BatchItem).where(
        BatchItem.state == "done", BatchItem.kind.in_(("image", "bitmap"))
    )
    if job_id:
        base = base.where(BatchItem.job_id == job_id)
    out: list[Discrepancy] = []
    scanned = 0
    cursor = before
    while scanned < max_scan:
        want = min(_CHUNK, max_scan - scanned)
        query = base if cursor is None else base.where(BatchItem.id < cursor)
        rows = list(session.execute(query.order_by(BatchItem.id.desc()).limit(want)).scalars())
        found: list[Discrepancy] = []
        for row in rows:
            if isinstance(row.result, dict):
                found.extend(
                    replace(d, item_id=row.id)
                    for d in discrepancies_in_result(row.result, job_id=row.job_id, item=row.path)
                    if label is None or d.label == label
                )
        reviews = _reviews(session, {d.item_id for d in found})
        page_full = False
        for row in rows:
            scanned += 1
            cursor = row.id
            for d in found:
                if d.item_id != row.id:
                    continue
                review = reviews.get((d.item_id, d.label))
                if unreviewed and review is not None:
                    continue
                out.append(replace(d, review=review_dict(review) if review else None))
            if len(out) >= limit:
                page_full = True
                break
        if page_full:
            return WorklistPage(out, scanned, cursor)
        if len(rows) < want:
            return WorklistPage(out, scanned, None)
    return WorklistPage(out, scanned, cursor)


def _reviews(session: Session, item_ids: set[int]) -> dict[tuple[int, str], WorklistReview]:
    if not item_ids:
        return {}
    query = select(WorklistReview).where(WorklistReview.batch_item_id.in_(item_ids))
    return {(r.batch_item_id, r.label): r for r in session.execute(query).scalars()}
