"""Database reads and writes, as explicit functions. The only module that commits."""

from __future__ import annotations

import uuid
from collections.abc import Iterable, Iterator, Sequence
from dataclasses import dataclass
from typing import Any

from sqlalchemy import case, delete, func, select, update
from sqlalchemy.orm import Session

from app.db.models import (
    BatchItem,
    BatchJob,
    Image,
    LabelResult,
    Prediction,
    Report,
    Study,
    utcnow,
)

__all__ = [
    "ItemOutcome",
    "NewItem",
    "add_batch_items",
    "batch_counts",
    "complete_items",
    "create_batch_job",
    "create_image",
    "create_label_results",
    "create_prediction",
    "delete_batch_job",
    "get_batch_job",
    "get_or_create_study",
    "get_prediction",
    "iter_batch_items",
    "job_counts_by_state",
    "list_batch_jobs",
    "done_report_items",
    "pending_items",
    "set_job_state",
    "unfinished_job_ids",
]

UNFINISHED = ("queued", "running")


@dataclass(frozen=True)
class NewItem:
    """A file found by the scan of a batch job's export."""

    path: str
    kind: str
    study_instance_uid: str | None = None
    accession_number: str | None = None
    note: str | None = None


@dataclass(frozen=True)
class ItemOutcome:
    """The result of processing one batch item: state done, skipped or failed."""

    item_id: int
    state: str
    result: dict[str, Any] | None = None
    error: str | None = None


def get_or_create_study(
    session: Session, study_instance_uid: str, accession_number: str | None = None
) -> Study:
    """The study with this UID, created if new (flushed, not committed)."""
    study = session.scalar(select(Study).where(Study.study_instance_uid == study_instance_uid))
    if study is None:
        study = Study(study_instance_uid=study_instance_uid, accession_number=accession_number)
        session.add(study)
        session.flush()
    elif accession_number and not study.accession_number:
        study.accession_number = accession_number
    return study


def create_image(
    session: Session,
    *,
    sha256: str,
    meta: Any,
    study: Study | None,
    pixels_key: str | None,
    upload_key: str | None,
) -> Image:
    """Record an uploaded image (flushed, not committed). `meta` is a models ImageMeta."""
    image = Image(
        study=study,
        sha256=sha256,
        series_instance_uid=meta.series_instance_uid,
        sop_instance_uid=meta.sop_instance_uid,
        sop_class_uid=meta.sop_class_uid,
        modality=meta.modality,
        rows=meta.rows,
        columns=meta.columns,
        pixels_key=pixels_key,
        upload_key=upload_key,
    )
    session.add(image)
    session.flush()
    return image


def create_prediction(
    session: Session,
    *,
    image: Image,
    card: dict[str, Any],
    probabilities: dict[str, float],
    positive: list[str],
    boxes: list[dict[str, Any]],
    heatmaps_key: str | None,
    heatmap_labels: list[str],
    timings: dict[str, float],
) -> Prediction:
    """Store a prediction with its image and commit; returns it with its new id."""
    prediction = Prediction(
        id=str(uuid.uuid4()),
        image=image,
        model_name=str(card.get("name", "unknown"))[:128],
        model_version=str(card.get("version", "unknown"))[:64],
        demo=bool(card.get("demo", False)),
        model_card=card,
        probabilities=probabilities,
        positive=positive,
        boxes=boxes,
        heatmaps_key=heatmaps_key,
        heatmap_labels=heatmap_labels,
        timings=timings,
    )
    session.add(prediction)
    session.commit()
    return prediction


def get_prediction(session: Session, prediction_id: str) -> Prediction | None:
    """The prediction with this id, or None."""
    return session.get(Prediction, prediction_id)


# Mention fields that quote the report (issue 7 item 7: a name typed in a report
# reached the database through its evidence sentence).
_MENTION_TEXT_KEYS = frozenset({"text", "sentence"})


def create_label_results(
    session: Session,
    results: Sequence[tuple[Any, str, str | None]],
    *,
    labeler_version: str,
    source: str,
    store_text: bool = False,
) -> list[LabelResult]:
    """Store labeled reports (text hashed, never stored) and commit.

    Args:
        results: (ReportLabels, text_sha256, study_instance_uid or None) per report;
            reports with an error are not stored.
        labeler_version: identifier of the labeler's rule set.
        source: where the reports came from ("api").
        store_text: keep each mention's words and sentence (CXR_STORE_REPORT_TEXT);
            by default they are dropped, leaving labels, offsets, rule ids and sections.
    """
    rows: list[LabelResult] = []
    for labels, text_sha256, study_uid in results:
        if getattr(labels, "error", None):
            continue
        study = get_or_create_study(session, study_uid) if study_uid else None
        report = Report(
            external_id=(labels.id or None) and str(labels.id)[:128],
            study=study,
            text_sha256=text_sha256,
            source=source,
        )
        data = labels.to_dict()
        row = LabelResult(
            report=report,
            labeler_version=labeler_version,
            labels=data["labels"],
            no_finding=bool(data["no_finding"]),
            mentions=(
                data["mentions"]
                if store_text
                else [
                    {k: v for k, v in m.items() if k not in _MENTION_TEXT_KEYS}
                    for m in data["mentions"]
                ]
            ),
        )
        session.add_all([report, row])
        rows.append(row)
    session.commit()
    return rows


def create_batch_job(
    session: Session,
    *,
    source_kind: str,
    source: str,
    reports_path: str | None,
    options: dict[str, Any] | None = None,
    job_id: str | None = None,
) -> BatchJob:
    """Create a queued batch job and commit."""
    job = BatchJob(
        id=job_id or str(uuid.uuid4()),
        state="queued",
        source_kind=source_kind,
        source=source,
        reports_path=reports_path,
        scanned=False,
        total=0,
        options=options or {},
    )
    session.add(job)
    session.commit()
    return job


def get_batch_job(session: Session, job_id: str) -> BatchJob | None:
    """The batch job with this id, or None."""
    return session.get(BatchJob, job_id)


def set_job_state(
    session: Session, job: BatchJob, state: str, *, error: str | None = None
) -> BatchJob:
    """Move a job to `state` (stamping start/finish times) and commit."""
    job.state = state
    now = utcnow()
    if state == "running" and job.started_at is None:
        job.started_at = now
    if state in ("done", "failed"):
        job.finished_at = now
    if error is not None:
        job.error = error
    session.commit()
    return job


def add_batch_items(session: Session, job: BatchJob, items: Iterable[NewItem]) -> int:
    """Record every file of a job's scan and mark the job scanned, in one transaction.

    Either all items and the `scanned` flag are committed, or none: a crash during
    the scan simply rescans on resume.

    Returns:
        The number of items.
    """
    count = 0
    for item in items:
        session.add(
            BatchItem(
                job_id=job.id,
                path=item.path,
                kind=item.kind,
                state="pending",
                study_instance_uid=item.study_instance_uid,
                accession_number=item.accession_number,
                scan_note=item.note,
            )
        )
        count += 1
        if count % 1000 == 0:
            session.flush()
    job.scanned = True
    job.total = count
    session.commit()
    return count


def pending_items(session: Session, job_id: str, limit: int) -> list[BatchItem]:
    """The next pending items of a job: structured reports first, then by id."""
    reports_first = case((BatchItem.kind == "sr", 0), else_=1)
    stmt = (
        select(BatchItem)
        .where(BatchItem.job_id == job_id, BatchItem.state == "pending")
        .order_by(reports_first, BatchItem.id)
        .limit(limit)
    )
    return list(session.scalars(stmt))


def complete_items(session: Session, outcomes: Iterable[ItemOutcome]) -> int:
    """Store outcomes of pending items and commit; an item already completed is left alone.

    The `state == 'pending'` guard makes completion idempotent, so an item is
    counted exactly once even if a chunk is processed twice after a crash.

    Returns:
        How many items changed.
    """
    changed = 0
    now = utcnow()
    for outcome in outcomes:
        result = session.execute(
            update(BatchItem)
            .where(BatchItem.id == outcome.item_id, BatchItem.state == "pending")
            .values(state=outcome.state, result=outcome.result, error=outcome.error, updated_at=now)
        )
        changed += int(getattr(result, "rowcount", 0) or 0)
    session.commit()
    return changed


def batch_counts(session: Session, job_id: str) -> dict[str, int]:
    """Items of a job by state (pending, done, skipped, failed), zeros included."""
    counts = {"pending": 0, "done": 0, "skipped": 0, "failed": 0}
    stmt = (
        select(BatchItem.state, func.count())
        .where(BatchItem.job_id == job_id)
        .group_by(BatchItem.state)
    )
    for state, n in session.execute(stmt):
        counts[state] = int(n)
    return counts


def done_report_items(session: Session, job_id: str) -> list[BatchItem]:
    """Structured-report items of a job already processed (to rebuild state on resume)."""
    stmt = select(BatchItem).where(
        BatchItem.job_id == job_id, BatchItem.kind == "sr", BatchItem.state == "done"
    )
    return list(session.scalars(stmt))


def iter_batch_items(session: Session, job_id: str, page: int = 500) -> Iterator[BatchItem]:
    """All completed items of a job in id order, fetched a page at a time."""
    last_id = 0
    while True:
        stmt = (
            select(BatchItem)
            .where(
                BatchItem.job_id == job_id,
                BatchItem.state != "pending",
                BatchItem.id > last_id,
            )
            .order_by(BatchItem.id)
            .limit(page)
        )
        rows = list(session.scalars(stmt))
        if not rows:
            return
        yield from rows
        last_id = rows[-1].id
        session.expunge_all()  # keep memory flat on exports of 100k files


def list_batch_jobs(session: Session, limit: int = 50) -> list[BatchJob]:
    """The most recent batch jobs, newest first."""
    stmt = select(BatchJob).order_by(BatchJob.created_at.desc()).limit(limit)
    return list(session.scalars(stmt))


def delete_batch_job(session: Session, job: BatchJob) -> None:
    """Delete a job and all its item results, and commit."""
    session.execute(delete(BatchItem).where(BatchItem.job_id == job.id))
    session.delete(job)
    session.commit()


def unfinished_job_ids(session: Session) -> list[str]:
    """Ids of jobs queued or running (to resume at start-up), oldest first."""
    stmt = select(BatchJob.id).where(BatchJob.state.in_(UNFINISHED)).order_by(BatchJob.created_at)
    return list(session.scalars(stmt))


def job_counts_by_state(session: Session) -> dict[str, int]:
    """Number of batch jobs per state."""
    stmt = select(BatchJob.state, func.count()).group_by(BatchJob.state)
    return {state: int(n) for state, n in session.execute(stmt)}
