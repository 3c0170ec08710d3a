"""Worklist reviews: a verdict, note, reviewer and time per (batch item, finding).

Revision ID: 0002
Revises: 0001
Create Date: 2026-12-05
"""

from __future__ import annotations

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

revision: str = "0002"
down_revision: str | None = "0001"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


def upgrade() -> None:
    op.create_table(
        "worklist_reviews",
        sa.Column("id", sa.Integer(), primary_key=True),
        sa.Column(
            "batch_item_id",
            sa.Integer(),
            sa.ForeignKey("batch_items.id", ondelete="CASCADE"),
            nullable=False,
        ),
        sa.Column("label", sa.String(64), nullable=False),
        sa.Column("decision", sa.String(16), nullable=True),
        sa.Column("note", sa.Text(), nullable=True),
        sa.Column("reviewer", sa.String(64), nullable=False),
        sa.Column("reviewed_at", sa.DateTime(timezone=True), nullable=False),
        sa.UniqueConstraint("batch_item_id", "label", name="uq_worklist_reviews_item_label"),
    )
    op.create_index("ix_worklist_reviews_batch_item_id", "worklist_reviews", ["batch_item_id"])


def downgrade() -> None:
    op.drop_index("ix_worklist_reviews_batch_item_id", table_name="worklist_reviews")
    op.drop_table("worklist_reviews")
