"""Database reads and writes, as explicit functions. The only module that commits."""

from __future__ import annotations

import json
import re
import uuid
from collections.abc import Iterable, Iterator, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from sqlalchemy import ColumnElement, Text, cast, delete, func, select, update
from sqlalchemy.exc import IntegrityError
from sqlalchemy.orm import Session

from app.db.models import (
    BatchItem,
    BatchJobRow,
    Image,
    LabelResult,
    PredictionRow,
    Report,
    Study,
    WorklistReview,
    WorklistRow,
    utcnow,
)
from batch.interfaces import SourceItem

if TYPE_CHECKING:
    from labeler import ReportLabels
    from models.dicom import ImageMeta
    from models.predict import Prediction

__all__ = [
    "ItemOutcome",
    "add_batch_items",
    "batch_counts",
    "complete_items",
    "create_batch_job",
    "create_image",
    "create_label_results",
    "create_prediction",
    "find_prediction",
    "store_prediction",
    "delete_batch_job",
    "get_batch_job",
    "get_or_create_study",
    "storable",
    "get_prediction",
    "iter_batch_items",
    "job_counts_by_state",
    "list_batch_jobs",
    "clear_in_flight",
    "in_flight_attempts",
    "job_items",
    "mark_in_flight",
    "mark_job_scanned",
    "remove_batch_items",
    "set_job_state",
    "unfinished_job_ids",
    "get_batch_item",
    "index_worklist",
    "save_review",
]

UNFINISHED = ("queued", "running")


# A pending item's `error` while a chunk holding it runs: the attempt count, so that a
# file that kills the process is not retried forever (see app.jobs).
IN_FLIGHT = "in flight, attempt "


@dataclass(frozen=True)
class ItemOutcome:
    """The result of processing one batch item (by its path): done, skipped or failed."""

    path: str
    state: str
    result: dict[str, Any] | None = None
    error: str | None = None


def get_or_create_study(
    session: Session, study_instance_uid: str, accession_number: str | None = None
) -> Study:
    """The study with this UID, created if new (flushed, not committed)."""
    study_instance_uid = storable(study_instance_uid)
    accession_number = storable(accession_number)
    query = select(Study).where(Study.study_instance_uid == study_instance_uid)
    study = session.scalar(query)
    if study is None:
        try:
            # A savepoint: two requests for one new study (the same DICOM uploaded twice at
            # once) race here, and the loser must not lose its whole transaction.
            with session.begin_nested():
                study = Study(
                    study_instance_uid=study_instance_uid, accession_number=accession_number
                )
                session.add(study)
        except IntegrityError:
            study = session.scalar(query)
            if study is None:
                raise
    if accession_number and not study.accession_number:
        study.accession_number = accession_number
    return study


def create_image(
    session: Session,
    *,
    sha256: str,
    meta: ImageMeta,
    study: Study | None,
    pixels_key: str | None,
    upload_key: str | None,
) -> Image:
    """Record an uploaded image (flushed, not committed)."""
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
) -> PredictionRow:
    """Store a prediction with its image and commit; returns it with its new id."""
    prediction = PredictionRow(
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


def store_prediction(
    session: Session,
    *,
    image: Image,
    card: dict[str, Any],
    prediction: Prediction,
    heatmaps_key: str | None,
) -> PredictionRow:
    """`create_prediction` for a model's `Prediction`: its probabilities, boxes, heatmap
    labels and timings as stored."""
    return create_prediction(
        session,
        image=image,
        card=card,
        probabilities=dict(prediction.probabilities),
        positive=list(prediction.positive),
        boxes=[b.to_dict() for b in prediction.boxes],
        heatmaps_key=heatmaps_key,
        heatmap_labels=list(prediction.heatmaps),
        timings={k: float(v) for k, v in prediction.timings.items()},
    )


def find_prediction(
    session: Session, *, image_sha256: str, card: dict[str, Any]
) -> PredictionRow | None:
    """The latest stored prediction of an image (by its hash) made by the model with this
    card (the same card: name, version, thresholds and inference alike), or None.

    A worklist row opened again reuses its prediction instead of storing a new one.
    """
    stmt = (
        select(PredictionRow)
        .join(Image)
        .where(
            Image.sha256 == image_sha256,
            PredictionRow.model_name == str(card.get("name", "unknown"))[:128],
            PredictionRow.model_version == str(card.get("version", "unknown"))[:64],
        )
        .order_by(PredictionRow.created_at.desc())
    )
    wanted = _canonical(card)
    return next(
        (row for row in session.scalars(stmt) if _canonical(row.model_card) == wanted), None
    )


def _canonical(value: Any) -> str:
    # a card as stored (JSON) and as the model gives it compare equal
    return json.dumps(value, sort_keys=True, default=str)


def get_prediction(session: Session, prediction_id: str) -> PredictionRow | None:
    """The prediction with this id, or None."""
    return session.get(PredictionRow, prediction_id)


# Mention fields that quote the report (issue 7 item 7: a name typed in a report
# reached the database through its evidence sentence).
_MENTION_TEXT_KEYS = frozenset({"text", "sentence"})

# PostgreSQL text and JSONB refuse NUL and unpaired surrogates (a non-UTF-8 file name
# decoded with surrogateescape); SQLite's driver refuses surrogates too.
_UNSTORABLE = re.compile("[\x00\ud800-\udfff]")


def storable(value: Any) -> Any:
    """`value` with every character a database refuses replaced by U+FFFD, one for one.

    Works through dicts and lists (JSON columns); offsets into stored strings stay valid.
    """
    if isinstance(value, str):
        return _UNSTORABLE.sub("\ufffd", value)
    if isinstance(value, dict):
        return {storable(k): storable(v) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return [storable(v) for v in value]
    return value


def create_label_results(
    session: Session,
    results: Sequence[tuple[ReportLabels, str, str | None]],
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
        if labels.error:
            continue
        study = get_or_create_study(session, study_uid) if study_uid else None
        report = Report(
            external_id=storable((labels.id or None) and str(labels.id)[:128]),
            study=study,
            text_sha256=text_sha256,
            source=source,
        )
        data = storable(labels.to_dict())
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
) -> BatchJobRow:
    """Create a queued batch job and commit."""
    job = BatchJobRow(
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


def get_batch_job(session: Session, job_id: str) -> BatchJobRow | None:
    """The batch job with this id, or None."""
    return session.get(BatchJobRow, job_id)


def set_job_state(session: Session, job_id: str, state: str, *, error: str | None = None) -> bool:
    """Move a job to `state` (stamping start/finish times) and commit.

    Returns:
        False when the job no longer exists (deleted while it ran).
    """
    job = session.get(BatchJobRow, job_id)
    if job is None:
        return False
    job.state = state
    now = utcnow()
    if state == "running" and job.started_at is None:
        job.started_at = now
    if state in ("done", "failed"):
        job.finished_at = now
    if error is not None:
        job.error = error
    session.commit()
    return True


def _clip(value: str | None, size: int = 64) -> str | None:
    # Header values go into 64-character columns; a malformed header may hold more.
    return storable(value[:size]) if value else value


def add_batch_items(
    session: Session, job_id: str, items: Iterable[SourceItem], *, chunk_size: int = 200
) -> int:
    """Record the items of a job's scan, committing every `chunk_size` items.

    The scan reads a header per item; each chunk is collected first and written in one
    short transaction, so a long scan never holds the database's write lock (issue 7
    item 4). A scan interrupted midway is redone: `remove_batch_items`, then this again;
    `mark_job_scanned` seals a complete scan.

    Returns:
        The number of items.
    """
    count = 0
    chunk: list[BatchItem] = []

    def flush() -> None:
        session.add_all(chunk)
        session.commit()
        chunk.clear()

    for item in items:
        chunk.append(
            BatchItem(
                job_id=job_id,
                path=storable(item.key),
                kind=item.kind,
                state="pending",
                study_instance_uid=_clip(item.study_instance_uid),
                accession_number=_clip(item.accession_number),
                scan_note=storable(item.note),
            )
        )
        count += 1
        if len(chunk) >= chunk_size:
            flush()
    flush()
    return count


def mark_job_scanned(session: Session, job_id: str, total: int) -> None:
    """Seal a job's scan: its items are all recorded."""
    session.execute(
        update(BatchJobRow).where(BatchJobRow.id == job_id).values(scanned=True, total=total)
    )
    session.commit()


def remove_batch_items(session: Session, job_id: str) -> None:
    """Delete a job's items (the rest of a scan interrupted before it was sealed)."""
    session.execute(delete(BatchItem).where(BatchItem.job_id == job_id))
    session.commit()


def job_items(session: Session, job_id: str) -> list[SourceItem]:
    """Every item of a job's scan, in scan order."""
    stmt = (
        select(
            BatchItem.path,
            BatchItem.kind,
            BatchItem.study_instance_uid,
            BatchItem.accession_number,
            BatchItem.scan_note,
        )
        .where(BatchItem.job_id == job_id)
        .order_by(BatchItem.id)
    )
    return [SourceItem(*row) for row in session.execute(stmt)]


def mark_in_flight(session: Session, job_id: str, paths: Sequence[str]) -> None:
    """Count one more attempt on pending items about to be processed, and commit."""
    if not paths:
        return
    stmt = select(BatchItem).where(
        BatchItem.job_id == job_id,
        BatchItem.path.in_([storable(p) for p in paths]),
        BatchItem.state == "pending",
    )
    attempts = in_flight_attempts(session, job_id)
    for item in session.scalars(stmt):
        item.error = f"{IN_FLIGHT}{attempts.get(item.path, 0) + 1}"
    session.commit()


def clear_in_flight(session: Session, job_id: str, paths: Sequence[str]) -> None:
    """Forget the attempts on pending items that were not processed after all, and commit."""
    if not paths:
        return
    session.execute(
        update(BatchItem)
        .where(
            BatchItem.job_id == job_id,
            BatchItem.path.in_([storable(p) for p in paths]),
            BatchItem.state == "pending",
        )
        .values(error=None)
    )
    session.commit()


def in_flight_attempts(session: Session, job_id: str) -> dict[str, int]:
    """Pending items that were being processed when the process stopped: path -> attempts."""
    stmt = select(BatchItem.path, BatchItem.error).where(
        BatchItem.job_id == job_id,
        BatchItem.state == "pending",
        BatchItem.error.startswith(IN_FLIGHT),
    )
    found: dict[str, int] = {}
    for path, error in session.execute(stmt):
        try:
            found[path] = int((error or "")[len(IN_FLIGHT) :])
        except ValueError:
            found[path] = 1
    return found


def complete_items(session: Session, job_id: str, outcomes: Iterable[ItemOutcome]) -> int:
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
            .where(
                BatchItem.job_id == job_id,
                BatchItem.path == storable(outcome.path),
                BatchItem.state == "pending",
            )
            .values(
                state=outcome.state,
                result=storable(outcome.result),
                error=storable(outcome.error),
                updated_at=now,
            )
        )
        changed += int(getattr(result, "rowcount", 0) or 0)
    # The worklist's rows of the images just done, in the same transaction as their results.
    done = [storable(o.path) for o in outcomes if o.state == "done"]
    for start in range(0, len(done), 500):
        _index_items(
            session,
            session.scalars(
                select(BatchItem).where(
                    BatchItem.job_id == job_id,
                    BatchItem.path.in_(done[start : start + 500]),
                    _PENDING_ROWS,
                )
            ),
        )
    session.commit()
    return changed


# Items done whose worklist rows were not derived yet (stored before the rows existed, or by
# a writer other than `complete_items`).
_PENDING_ROWS = BatchItem.worklist_indexed.is_(False) & (BatchItem.state == "done")


def index_worklist(session: Session, *, chunk: int = 500) -> int:
    """Derive the worklist rows of every item done that has none yet, and commit per chunk.

    `complete_items` derives them as results are stored; this catches up results stored
    before the worklist had rows, before the worklist is read.

    Returns:
        How many items were indexed.
    """
    total = 0
    while True:
        items = list(session.scalars(select(BatchItem).where(_PENDING_ROWS).limit(chunk)))
        if not items:
            return total
        _index_items(session, items)
        try:
            session.commit()
        except IntegrityError:
            # Another request indexed the same items at the same time: theirs stand.
            session.rollback()
            continue
        total += len(items)


def _index_items(session: Session, items: Iterable[BatchItem]) -> None:
    from app.worklist import discrepancies_in_result

    for item in items:
        item.worklist_indexed = True
        if item.kind not in ("image", "bitmap") or not isinstance(item.result, dict):
            continue
        for d in discrepancies_in_result(item.result):
            probability = d.image.get("probability")
            session.add(
                WorklistRow(
                    batch_item_id=item.id,
                    job_id=item.job_id,
                    label=d.label[:64],
                    probability=float(probability)
                    if isinstance(probability, int | float)
                    else None,
                )
            )


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


def list_batch_jobs(session: Session, limit: int = 50) -> list[BatchJobRow]:
    """The most recent batch jobs, newest first."""
    stmt = select(BatchJobRow).order_by(BatchJobRow.created_at.desc()).limit(limit)
    return list(session.scalars(stmt))


def delete_batch_job(session: Session, job: BatchJobRow) -> list[str]:
    """Delete a job, its item results and reviews, and the predictions made by opening its
    worklist rows; commit.

    Storage is content-addressed: the same image kept by two jobs is one file. So the
    files returned are only those no remaining row references (another job's item, an
    image, a prediction).

    Returns:
        Storage keys of the job's kept review images, and of what opening their rows stored
        (display copies, heatmaps), that nothing references any more: the caller deletes
        the files.
    """
    # Lock the job first: a scan still adding items (a cancel is seen between files) then
    # waits for this delete and finds the job gone, instead of adding items after the items
    # are deleted and before the job is, which fails the delete (PostgreSQL; SQLite writes
    # one at a time and ignores the lock).
    session.execute(select(BatchJobRow.id).where(BatchJobRow.id == job.id).with_for_update())
    kept = _kept_review_images(session, BatchItem.job_id == job.id)
    items = select(BatchItem.id).where(BatchItem.job_id == job.id)
    session.execute(delete(WorklistReview).where(WorklistReview.batch_item_id.in_(items)))
    session.execute(delete(WorklistRow).where(WorklistRow.job_id == job.id))
    session.execute(delete(BatchItem).where(BatchItem.job_id == job.id))
    session.delete(job)
    session.flush()
    others = {
        key
        for pair in _kept_review_images(session, BatchItem.job_id != job.id)
        for key in pair.values()
    }
    candidates = {key for pair in kept for key in pair.values()} - others
    # Opening a row stored an image named by the kept model input's hash (`app.routes.
    # discrepancies`): those predictions go with the last job that kept the input.
    hashes = {pair["input"][:64] for pair in kept if pair["input"] not in others}
    opened = list(
        session.scalars(select(PredictionRow).join(Image).where(Image.sha256.in_(hashes)))
    )
    images = {row.image for row in opened}
    for row in opened:
        if row.heatmaps_key:
            candidates.add(row.heatmaps_key)
        session.delete(row)
    for image in images:
        if image.pixels_key:
            candidates.add(image.pixels_key)
        session.delete(image)
    session.flush()
    referenced = set()
    if candidates:
        referenced |= set(
            session.scalars(select(Image.pixels_key).where(Image.pixels_key.in_(candidates)))
        )
        referenced |= set(
            session.scalars(select(Image.upload_key).where(Image.upload_key.in_(candidates)))
        )
        referenced |= set(
            session.scalars(
                select(PredictionRow.heatmaps_key).where(PredictionRow.heatmaps_key.in_(candidates))
            )
        )
    session.commit()
    return sorted(candidates - referenced)


def _kept_review_images(session: Session, where: ColumnElement[bool]) -> list[dict[str, str]]:
    """The storage keys ({"preview", "input"}) of the review images kept by the items that
    match `where` (`app.review_images`)."""
    from app.worklist import REVIEW_KEY

    stmt = (
        select(BatchItem.result)
        .where(where, cast(BatchItem.result, Text).like(f"%{REVIEW_KEY}%"))
        .execution_options(yield_per=500)
    )
    out = []
    for result in session.scalars(stmt):
        keys = result.get(REVIEW_KEY) if isinstance(result, dict) else None
        if isinstance(keys, dict) and keys.get("preview") and keys.get("input"):
            out.append({"preview": str(keys["preview"]), "input": str(keys["input"])})
    return out


def unfinished_job_ids(session: Session) -> list[str]:
    """Ids of jobs queued or running (to resume at start-up), oldest first."""
    stmt = (
        select(BatchJobRow.id)
        .where(BatchJobRow.state.in_(UNFINISHED))
        .order_by(BatchJobRow.created_at)
    )
    return list(session.scalars(stmt))


def job_counts_by_state(session: Session) -> dict[str, int]:
    """Number of batch jobs per state."""
    stmt = select(BatchJobRow.state, func.count()).group_by(BatchJobRow.state)
    return {state: int(n) for state, n in session.execute(stmt)}


def get_batch_item(session: Session, item_id: int) -> BatchItem | None:
    """The batch item with this id, or None."""
    return session.get(BatchItem, item_id)


def save_review(
    session: Session,
    *,
    item: BatchItem,
    label: str,
    decision: str | None,
    note: str | None,
    reviewer: str,
) -> WorklistReview:
    """Record (or replace) the review of one worklist row, stamped now, and commit."""
    try:
        return _save_review(session, item.id, label, decision, note, reviewer)
    except IntegrityError:
        # Two reviewers saved the same row at once: the other insert won; update it.
        session.rollback()
        return _save_review(session, item.id, label, decision, note, reviewer)


def _save_review(
    session: Session,
    item_id: int,
    label: str,
    decision: str | None,
    note: str | None,
    reviewer: str,
) -> WorklistReview:
    review = session.scalars(
        select(WorklistReview).where(
            WorklistReview.batch_item_id == item_id, WorklistReview.label == label
        )
    ).first()
    if review is None:
        review = WorklistReview(batch_item_id=item_id, label=label, reviewer=reviewer)
        session.add(review)
    review.decision = decision
    review.note = storable(note) if note else None
    review.reviewer = reviewer
    review.reviewed_at = utcnow()
    session.commit()
    return review
