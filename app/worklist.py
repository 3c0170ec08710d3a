"""The discrepancy worklist: stored batch results whose report and image disagree.

Batch jobs that had both a report and a model store, per image, the report's labels and
the prediction (probabilities, positives, boxes) in `BatchItem.result`. This module reads
those results and lists, per image and finding, where the report and the image disagree on
presence or side (`batch.study_questions.discrepancy_of`). Batch results carry the report's
`findings` (side, site, size, ...), so a finding on the other side is flagged too; results
written before they did compare presence only.

The rows are derived once, when a result is stored (`crud.complete_items`, into
`WorklistRow`: item, job, finding, probability), so filters, sorts (newest, finding,
probability, job, review state) and keyset paging all run in the query; a page then reads
only its own items' results for the rest of each row. Each row carries its review
(`WorklistReview`: verdict, note, who and when) when it has one.
"""

from __future__ import annotations

import base64
import json
from dataclasses import dataclass, fields, replace
from datetime import datetime
from typing import Any, Literal, get_args

from sqlalchemy import and_, func, or_, select
from sqlalchemy.orm import Session

from app.db.models import BatchItem, BatchJobRow, WorklistReview, WorklistRow
from batch.study_questions import discrepancy_of
from models.boxes import Box
from models.image_findings import ImageFindings

__all__ = [
    "DECISIONS",
    "REVIEW_KEY",
    "SORTS",
    "CursorError",
    "Decision",
    "Discrepancy",
    "Sort",
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
        items: the rows, in the order asked for.
        scanned: rows read for this page.
        next_cursor: pass as `cursor` (with the same sort) for the next page; None when
            this page holds the last row.
    """

    items: list[Discrepancy]
    scanned: int
    next_cursor: str | None


# Sort keys: what the radiologist orders the worklist by, and its natural direction.
Sort = Literal["newest", "finding", "probability", "job", "review"]
SORTS: tuple[str, ...] = get_args(Sort)
_DESCENDING_BY_DEFAULT = {
    "newest": True,
    "finding": False,
    "probability": True,
    "job": True,
    "review": False,
}


class CursorError(ValueError):
    """A worklist cursor that is not one of this sort's (or not a cursor at all)."""


def _sort_key(sort: str) -> Any:
    if sort == "finding":
        return WorklistRow.label
    if sort == "probability":
        return func.coalesce(WorklistRow.probability, -1.0)
    if sort == "job":
        return BatchJobRow.created_at
    if sort == "review":
        return func.coalesce(WorklistReview.decision, "")
    return WorklistRow.batch_item_id


def _encode_cursor(sort: str, descending: bool, value: Any, row_id: int) -> str:
    if isinstance(value, datetime):
        value = value.isoformat()
    raw = json.dumps({"s": sort, "d": descending, "k": value, "i": row_id})
    return base64.urlsafe_b64encode(raw.encode()).decode().rstrip("=")


def _decode_cursor(cursor: str, sort: str, descending: bool) -> tuple[Any, int]:
    try:
        raw = json.loads(base64.urlsafe_b64decode(cursor + "=" * (-len(cursor) % 4)))
        value, row_id = raw["k"], int(raw["i"])
        same = raw["s"] == sort and raw["d"] == descending
    except (ValueError, TypeError, KeyError, UnicodeDecodeError):
        raise CursorError("not a worklist cursor: pass a page's `next_cursor` as it is") from None
    if not same:
        raise CursorError(
            f"this cursor pages the worklist sorted by {raw['s']} "
            f"({'descending' if raw['d'] else 'ascending'}); start again without it after "
            "changing the sort"
        )
    if sort == "job":
        try:
            value = datetime.fromisoformat(str(value))
        except ValueError:
            raise CursorError("not a worklist cursor: its job time is not a time") from None
    # a cursor edited by hand must not reach the database with the wrong type (PostgreSQL
    # refuses to compare a number with text)
    types: dict[str, tuple[type, ...]] = {
        "newest": (int,),
        "finding": (str,),
        "probability": (int, float),
        "review": (str,),
        "job": (datetime,),
    }
    wanted = types[sort]
    if not isinstance(value, wanted) or isinstance(value, bool):
        raise CursorError("not a worklist cursor: its sort value has the wrong type")
    return value, row_id


def list_discrepancies(
    session: Session,
    *,
    job_id: str | None = None,
    label: str | None = None,
    unreviewed: bool = False,
    sort: str = "newest",
    descending: bool | None = None,
    cursor: str | None = None,
    limit: int = 100,
) -> WorklistPage:
    """One page of disagreements across batch jobs (or one job), sorted in the query.

    Keyset paging on (sort key, row id): a page costs the same however deep it is, and a
    row is on exactly one page while the rows do not change. (A row reviewed while pages
    sorted by review are read moves; it may then be seen twice or not at all.)

    Args:
        session: a database session (read only; `crud.index_worklist` derives the rows of
            results stored before the worklist had rows, and is called before this).
        job_id: only this job's rows.
        label: only rows of this finding.
        unreviewed: only rows without a review.
        sort: "newest" (item, newest first), "finding", "probability" (highest first),
            "job" (newest job first) or "review" (unreviewed first, then by verdict).
        descending: the other direction than the sort's own when given.
        cursor: a page's `next_cursor`, with the same sort and direction.
        limit: rows per page.

    Returns:
        The page, with the cursor of the next one.

    Raises:
        CursorError: `cursor` is not a cursor of this sort and direction.
        ValueError: `sort` is not one of `SORTS`.
    """
    if sort not in SORTS:
        raise ValueError(f"sort must be one of {', '.join(SORTS)}, got {sort!r}")
    desc = _DESCENDING_BY_DEFAULT[sort] if descending is None else descending
    key = _sort_key(sort)
    review_on = and_(
        WorklistReview.batch_item_id == WorklistRow.batch_item_id,
        WorklistReview.label == WorklistRow.label,
    )
    query = select(WorklistRow, key).outerjoin(WorklistReview, review_on)
    if sort == "job":
        query = query.join(BatchJobRow, BatchJobRow.id == WorklistRow.job_id)
    if job_id:
        query = query.where(WorklistRow.job_id == job_id)
    if label:
        query = query.where(WorklistRow.label == label)
    if unreviewed:
        query = query.where(WorklistReview.id.is_(None))
    if cursor is not None:
        value, row_id = _decode_cursor(cursor, sort, desc)
        if desc:
            query = query.where(or_(key < value, and_(key == value, WorklistRow.id < row_id)))
        else:
            query = query.where(or_(key > value, and_(key == value, WorklistRow.id > row_id)))
    order = (key.desc(), WorklistRow.id.desc()) if desc else (key.asc(), WorklistRow.id.asc())
    found = [
        (row, value) for row, value in session.execute(query.order_by(*order).limit(limit + 1))
    ]
    page, more = found[:limit], len(found) > limit
    items = _rows_of(session, [row for row, _ in page])
    next_cursor = _encode_cursor(sort, desc, page[-1][1], page[-1][0].id) if more else None
    return WorklistPage(items, len(page), next_cursor)


def _rows_of(session: Session, rows: list[WorklistRow]) -> list[Discrepancy]:
    """The full rows (read from their items' results) with their reviews, in `rows`' order."""
    ids = {r.batch_item_id for r in rows}
    if not ids:
        return []
    items = {i.id: i for i in session.scalars(select(BatchItem).where(BatchItem.id.in_(ids)))}
    reviews = _reviews(session, ids)
    derived: dict[tuple[int, str], Discrepancy] = {}
    for item in items.values():
        if isinstance(item.result, dict):
            for found in discrepancies_in_result(item.result, job_id=item.job_id, item=item.path):
                derived[(item.id, found.label)] = replace(found, item_id=item.id)
    out = []
    for r in rows:
        d = derived.get((r.batch_item_id, r.label))
        if d is None:  # pragma: no cover - a row is derived from this very result
            continue
        review = reviews.get((r.batch_item_id, r.label))
        out.append(replace(d, review=review_dict(review) if review else None))
    return out


def _reviews(session: Session, item_ids: set[int]) -> dict[tuple[int, str], WorklistReview]:
    if not item_ids:
        return {}
    query = select(WorklistReview).where(WorklistReview.batch_item_id.in_(item_ids))
    return {(r.batch_item_id, r.label): r for r in session.execute(query).scalars()}
