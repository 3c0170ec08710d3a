"""SQLAlchemy 2 models: studies, images, reports, label results, predictions, batch jobs.

Identifying data policy: no patient name, ID or birth date is stored. A report
is stored as its SHA-256; its mentions keep labels, offsets and rule ids, and their
words and sentences only with CXR_STORE_REPORT_TEXT. Images keep their DICOM UIDs
(needed to echo results back to a PACS) and content hash.
"""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Any

from sqlalchemy import (
    JSON,
    Boolean,
    DateTime,
    Float,
    ForeignKey,
    Index,
    Integer,
    String,
    Text,
    UniqueConstraint,
)
from sqlalchemy.dialects.postgresql import JSONB
from sqlalchemy.orm import DeclarativeBase, Mapped, mapped_column, relationship
from sqlalchemy.sql.expression import false

__all__ = [
    "Base",
    "BatchItem",
    "BatchJobRow",
    "Image",
    "JSONType",
    "LabelResult",
    "PredictionRow",
    "Report",
    "Study",
    "WorklistReview",
    "WorklistRow",
    "utcnow",
]

# JSONB on PostgreSQL (indexable, compact), plain JSON text elsewhere.
JSONType = JSON().with_variant(JSONB(), "postgresql")

UID = String(64)  # DICOM UIDs are at most 64 characters (PS3.5 9.1).


def utcnow() -> datetime:
    """Timezone-aware now, the one clock the models use."""
    return datetime.now(UTC)


class Base(DeclarativeBase):
    """Declarative base; JSON-typed columns map to JSONB on PostgreSQL."""

    type_annotation_map = {dict[str, Any]: JSONType, list[Any]: JSONType}


class Study(Base):
    """A DICOM study, known by its StudyInstanceUID (and accession number when given)."""

    __tablename__ = "studies"
    __table_args__ = (UniqueConstraint("study_instance_uid", name="uq_studies_study_instance_uid"),)

    id: Mapped[int] = mapped_column(Integer, primary_key=True)
    study_instance_uid: Mapped[str] = mapped_column(UID)
    accession_number: Mapped[str | None] = mapped_column(String(64), index=True)
    created_at: Mapped[datetime] = mapped_column(DateTime(timezone=True), default=utcnow)

    images: Mapped[list[Image]] = relationship(back_populates="study")


class Image(Base):
    """One uploaded image (a DICOM instance, or a PNG/JPEG without UIDs)."""

    __tablename__ = "images"

    id: Mapped[int] = mapped_column(Integer, primary_key=True)
    study_id: Mapped[int | None] = mapped_column(ForeignKey("studies.id"), index=True)
    sha256: Mapped[str] = mapped_column(String(64), index=True)
    series_instance_uid: Mapped[str | None] = mapped_column(UID)
    sop_instance_uid: Mapped[str | None] = mapped_column(UID, index=True)
    sop_class_uid: Mapped[str | None] = mapped_column(UID)
    modality: Mapped[str | None] = mapped_column(String(16))
    rows: Mapped[int] = mapped_column(Integer)
    columns: Mapped[int] = mapped_column(Integer)
    pixels_key: Mapped[str | None] = mapped_column(String(96))
    upload_key: Mapped[str | None] = mapped_column(String(96))
    created_at: Mapped[datetime] = mapped_column(DateTime(timezone=True), default=utcnow)

    study: Mapped[Study | None] = relationship(back_populates="images")


class Report(Base):
    """A labeled report. The text itself is not stored, only its hash."""

    __tablename__ = "reports"

    id: Mapped[int] = mapped_column(Integer, primary_key=True)
    external_id: Mapped[str | None] = mapped_column(String(128), index=True)
    study_id: Mapped[int | None] = mapped_column(ForeignKey("studies.id"), index=True)
    text_sha256: Mapped[str] = mapped_column(String(64), index=True)
    source: Mapped[str] = mapped_column(String(16))
    created_at: Mapped[datetime] = mapped_column(DateTime(timezone=True), default=utcnow)

    study: Mapped[Study | None] = relationship()
    results: Mapped[list[LabelResult]] = relationship(back_populates="report")


class LabelResult(Base):
    """The labeler's output for one report."""

    __tablename__ = "label_results"

    id: Mapped[int] = mapped_column(Integer, primary_key=True)
    report_id: Mapped[int] = mapped_column(ForeignKey("reports.id"), index=True)
    labeler_version: Mapped[str] = mapped_column(String(64))
    labels: Mapped[dict[str, Any]] = mapped_column(JSONType)
    no_finding: Mapped[bool] = mapped_column(Boolean)
    mentions: Mapped[list[Any]] = mapped_column(JSONType)
    created_at: Mapped[datetime] = mapped_column(DateTime(timezone=True), default=utcnow)

    report: Mapped[Report] = relationship(back_populates="results")


class PredictionRow(Base):
    """One model prediction on one image; `id` is a random UUID (unguessable in URLs)."""

    __tablename__ = "predictions"

    id: Mapped[str] = mapped_column(String(36), primary_key=True)
    image_id: Mapped[int] = mapped_column(ForeignKey("images.id"), index=True)
    model_name: Mapped[str] = mapped_column(String(128))
    model_version: Mapped[str] = mapped_column(String(64))
    demo: Mapped[bool] = mapped_column(Boolean)
    model_card: Mapped[dict[str, Any]] = mapped_column(JSONType)
    probabilities: Mapped[dict[str, Any]] = mapped_column(JSONType)
    positive: Mapped[list[Any]] = mapped_column(JSONType)
    boxes: Mapped[list[Any]] = mapped_column(JSONType)
    heatmaps_key: Mapped[str | None] = mapped_column(String(96))
    heatmap_labels: Mapped[list[Any]] = mapped_column(JSONType)
    timings: Mapped[dict[str, Any]] = mapped_column(JSONType)
    created_at: Mapped[datetime] = mapped_column(DateTime(timezone=True), default=utcnow)

    image: Mapped[Image] = relationship()


class BatchJobRow(Base):
    """A background job labeling a PACS export (server folder or uploaded zip).

    state: queued -> running -> done | failed. Progress counts are derived from
    the items, so they can never drift from what was actually processed.
    """

    __tablename__ = "batch_jobs"

    id: Mapped[str] = mapped_column(String(36), primary_key=True)
    state: Mapped[str] = mapped_column(String(16), index=True)
    source_kind: Mapped[str] = mapped_column(String(8))
    source: Mapped[str] = mapped_column(Text)
    reports_path: Mapped[str | None] = mapped_column(Text)
    scanned: Mapped[bool] = mapped_column(Boolean, default=False)
    total: Mapped[int] = mapped_column(Integer, default=0)
    error: Mapped[str | None] = mapped_column(Text)
    options: Mapped[dict[str, Any]] = mapped_column(JSONType, default=dict)
    created_at: Mapped[datetime] = mapped_column(DateTime(timezone=True), default=utcnow)
    started_at: Mapped[datetime | None] = mapped_column(DateTime(timezone=True))
    finished_at: Mapped[datetime | None] = mapped_column(DateTime(timezone=True))

    items: Mapped[list[BatchItem]] = relationship(back_populates="job")


class BatchItem(Base):
    """One file of a batch job. (job_id, path) is unique: a file is recorded once."""

    __tablename__ = "batch_items"
    __table_args__ = (
        UniqueConstraint("job_id", "path", name="uq_batch_items_job_path"),
        Index("ix_batch_items_job_state", "job_id", "state"),
        Index("ix_batch_items_worklist_pending", "worklist_indexed", "state"),
    )

    id: Mapped[int] = mapped_column(Integer, primary_key=True)
    job_id: Mapped[str] = mapped_column(ForeignKey("batch_jobs.id"))
    path: Mapped[str] = mapped_column(Text)
    kind: Mapped[str] = mapped_column(String(16))
    state: Mapped[str] = mapped_column(String(16))
    study_instance_uid: Mapped[str | None] = mapped_column(UID)
    accession_number: Mapped[str | None] = mapped_column(String(64))
    scan_note: Mapped[str | None] = mapped_column(Text)
    result: Mapped[dict[str, Any] | None] = mapped_column(JSONType)
    error: Mapped[str | None] = mapped_column(Text)
    updated_at: Mapped[datetime] = mapped_column(DateTime(timezone=True), default=utcnow)
    # whether its worklist rows (`WorklistRow`) were derived from its result
    worklist_indexed: Mapped[bool] = mapped_column(Boolean, default=False, server_default=false())

    job: Mapped[BatchJobRow] = relationship(back_populates="items")


class WorklistReview(Base):
    """A radiologist's verdict on one worklist row: one finding of one batch item.

    decision: agree_report | agree_model | dismissed (or null: a note only). One row per
    (item, finding), updated in place: the latest verdict, who gave it (the API key's name)
    and when.
    """

    __tablename__ = "worklist_reviews"
    __table_args__ = (
        UniqueConstraint("batch_item_id", "label", name="uq_worklist_reviews_item_label"),
    )

    id: Mapped[int] = mapped_column(Integer, primary_key=True)
    batch_item_id: Mapped[int] = mapped_column(
        ForeignKey("batch_items.id", ondelete="CASCADE"), index=True
    )
    label: Mapped[str] = mapped_column(String(64))
    decision: Mapped[str | None] = mapped_column(String(16))
    note: Mapped[str | None] = mapped_column(Text)
    reviewer: Mapped[str] = mapped_column(String(64))
    reviewed_at: Mapped[datetime] = mapped_column(DateTime(timezone=True), default=utcnow)


class WorklistRow(Base):
    """One worklist row: a finding on which a batch item's report and image disagree.

    Derived from the item's stored result (`app.worklist.discrepancies_in_result`) when the
    result is stored (`crud.complete_items`; older results on the worklist's first read), with
    the columns the worklist filters and sorts on, so it pages in the query whatever the sort.
    The rest of the row is read from the item's result, for the rows of one page only.
    """

    __tablename__ = "worklist_rows"
    __table_args__ = (
        UniqueConstraint("batch_item_id", "label", name="uq_worklist_rows_item_label"),
        Index("ix_worklist_rows_label_id", "label", "id"),
        Index("ix_worklist_rows_probability_id", "probability", "id"),
    )

    id: Mapped[int] = mapped_column(Integer, primary_key=True)
    batch_item_id: Mapped[int] = mapped_column(
        ForeignKey("batch_items.id", ondelete="CASCADE"), index=True
    )
    job_id: Mapped[str] = mapped_column(String(36), index=True)
    label: Mapped[str] = mapped_column(String(64))
    probability: Mapped[float | None] = mapped_column(Float)
