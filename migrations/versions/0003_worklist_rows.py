"""Worklist rows: one row per (batch item, finding) where report and image disagree, with
the columns the worklist sorts and pages on; `batch_items.worklist_indexed` says whether an
item's rows were derived (results stored before this revision are derived on the worklist's
first read, by the service: a migration imports only the models).

Revision ID: 0003
Revises: 0002
Create Date: 2026-12-05
"""

from __future__ import annotations

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

revision: str = "0003"
down_revision: str | None = "0002"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


def upgrade() -> None:
    with op.batch_alter_table("batch_items") as batch:
        batch.add_column(
            sa.Column("worklist_indexed", sa.Boolean(), nullable=False, server_default=sa.false())
        )
        batch.create_index("ix_batch_items_worklist_pending", ["worklist_indexed", "state"])
    op.create_table(
        "worklist_rows",
        sa.Column("id", sa.Integer(), primary_key=True),
        sa.Column(
            "batch_item_id",
            sa.Integer(),
            sa.ForeignKey("batch_items.id", ondelete="CASCADE"),
            nullable=False,
        ),
        sa.Column("job_id", sa.String(36), nullable=False),
        sa.Column("label", sa.String(64), nullable=False),
        sa.Column("probability", sa.Float(), nullable=True),
        sa.UniqueConstraint("batch_item_id", "label", name="uq_worklist_rows_item_label"),
    )
    op.create_index("ix_worklist_rows_batch_item_id", "worklist_rows", ["batch_item_id"])
    op.create_index("ix_worklist_rows_job_id", "worklist_rows", ["job_id"])
    op.create_index("ix_worklist_rows_label_id", "worklist_rows", ["label", "id"])
    op.create_index("ix_worklist_rows_probability_id", "worklist_rows", ["probability", "id"])


def downgrade() -> None:
    op.drop_table("worklist_rows")
    with op.batch_alter_table("batch_items") as batch:
        batch.drop_index("ix_batch_items_worklist_pending")
        batch.drop_column("worklist_indexed")
