"""Initial schema: studies, images, reports, label results, predictions, batch jobs and items.

Revision ID: 0001
Revises:
Create Date: 2026-11-23
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import sqlalchemy as sa
from alembic import op
from sqlalchemy.dialects import postgresql

revision: str = "0001"
down_revision: str | None = None
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


def _json() -> sa.types.TypeEngine[Any]:
    return sa.JSON().with_variant(postgresql.JSONB(), "postgresql")


def _created() -> sa.Column[object]:
    return sa.Column("created_at", sa.DateTime(timezone=True), nullable=False)


def upgrade() -> None:
    op.create_table(
        "studies",
        sa.Column("id", sa.Integer(), primary_key=True),
        sa.Column("study_instance_uid", sa.String(64), nullable=False),
        sa.Column("accession_number", sa.String(64), nullable=True),
        _created(),
        sa.UniqueConstraint("study_instance_uid", name="uq_studies_study_instance_uid"),
    )
    op.create_index("ix_studies_accession_number", "studies", ["accession_number"])

    op.create_table(
        "images",
        sa.Column("id", sa.Integer(), primary_key=True),
        sa.Column("study_id", sa.Integer(), sa.ForeignKey("studies.id"), nullable=True),
        sa.Column("sha256", sa.String(64), nullable=False),
        sa.Column("series_instance_uid", sa.String(64), nullable=True),
        sa.Column("sop_instance_uid", sa.String(64), nullable=True),
        sa.Column("sop_class_uid", sa.String(64), nullable=True),
        sa.Column("modality", sa.String(16), nullable=True),
        sa.Column("rows", sa.Integer(), nullable=False),
        sa.Column("columns", sa.Integer(), nullable=False),
        sa.Column("pixels_key", sa.String(96), nullable=True),
        sa.Column("upload_key", sa.String(96), nullable=True),
        _created(),
    )
    op.create_index("ix_images_study_id", "images", ["study_id"])
    op.create_index("ix_images_sha256", "images", ["sha256"])
    op.create_index("ix_images_sop_instance_uid", "images", ["sop_instance_uid"])

    op.create_table(
        "reports",
        sa.Column("id", sa.Integer(), primary_key=True),
        sa.Column("external_id", sa.String(128), nullable=True),
        sa.Column("study_id", sa.Integer(), sa.ForeignKey("studies.id"), nullable=True),
        sa.Column("text_sha256", sa.String(64), nullable=False),
        sa.Column("source", sa.String(16), nullable=False),
        _created(),
    )
    op.create_index("ix_reports_external_id", "reports", ["external_id"])
    op.create_index("ix_reports_study_id", "reports", ["study_id"])
    op.create_index("ix_reports_text_sha256", "reports", ["text_sha256"])

    op.create_table(
        "label_results",
        sa.Column("id", sa.Integer(), primary_key=True),
        sa.Column("report_id", sa.Integer(), sa.ForeignKey("reports.id"), nullable=False),
        sa.Column("labeler_version", sa.String(64), nullable=False),
        sa.Column("labels", _json(), nullable=False),
        sa.Column("no_finding", sa.Boolean(), nullable=False),
        sa.Column("mentions", _json(), nullable=False),
        _created(),
    )
    op.create_index("ix_label_results_report_id", "label_results", ["report_id"])

    op.create_table(
        "predictions",
        sa.Column("id", sa.String(36), primary_key=True),
        sa.Column("image_id", sa.Integer(), sa.ForeignKey("images.id"), nullable=False),
        sa.Column("model_name", sa.String(128), nullable=False),
        sa.Column("model_version", sa.String(64), nullable=False),
        sa.Column("demo", sa.Boolean(), nullable=False),
        sa.Column("model_card", _json(), nullable=False),
        sa.Column("probabilities", _json(), nullable=False),
        sa.Column("positive", _json(), nullable=False),
        sa.Column("boxes", _json(), nullable=False),
        sa.Column("heatmaps_key", sa.String(96), nullable=True),
        sa.Column("heatmap_labels", _json(), nullable=False),
        sa.Column("timings", _json(), nullable=False),
        _created(),
    )
    op.create_index("ix_predictions_image_id", "predictions", ["image_id"])

    op.create_table(
        "batch_jobs",
        sa.Column("id", sa.String(36), primary_key=True),
        sa.Column("state", sa.String(16), nullable=False),
        sa.Column("source_kind", sa.String(8), nullable=False),
        sa.Column("source", sa.Text(), nullable=False),
        sa.Column("reports_path", sa.Text(), nullable=True),
        sa.Column("scanned", sa.Boolean(), nullable=False),
        sa.Column("total", sa.Integer(), nullable=False),
        sa.Column("error", sa.Text(), nullable=True),
        sa.Column("options", _json(), nullable=False),
        _created(),
        sa.Column("started_at", sa.DateTime(timezone=True), nullable=True),
        sa.Column("finished_at", sa.DateTime(timezone=True), nullable=True),
    )
    op.create_index("ix_batch_jobs_state", "batch_jobs", ["state"])

    op.create_table(
        "batch_items",
        sa.Column("id", sa.Integer(), primary_key=True),
        sa.Column("job_id", sa.String(36), sa.ForeignKey("batch_jobs.id"), nullable=False),
        sa.Column("path", sa.Text(), nullable=False),
        sa.Column("kind", sa.String(16), nullable=False),
        sa.Column("state", sa.String(16), nullable=False),
        sa.Column("study_instance_uid", sa.String(64), nullable=True),
        sa.Column("accession_number", sa.String(64), nullable=True),
        sa.Column("scan_note", sa.Text(), nullable=True),
        sa.Column("result", _json(), nullable=True),
        sa.Column("error", sa.Text(), nullable=True),
        sa.Column("updated_at", sa.DateTime(timezone=True), nullable=False),
        sa.UniqueConstraint("job_id", "path", name="uq_batch_items_job_path"),
    )
    op.create_index("ix_batch_items_job_state", "batch_items", ["job_id", "state"])


def downgrade() -> None:
    for table in (
        "batch_items",
        "batch_jobs",
        "predictions",
        "label_results",
        "reports",
        "images",
        "studies",
    ):
        op.drop_table(table)
