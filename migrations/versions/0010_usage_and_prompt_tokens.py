"""usage_minutes (chargeback aggregates) and batches.prompt_tokens (enqueued-token limit)

Revision ID: 0010
Revises: 0008
Create Date: 2026-11-25
"""

import sqlalchemy as sa
from alembic import op

revision = "0010"
down_revision = "0008"
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.create_table(
        "usage_minutes",
        sa.Column("project", sa.String(128), nullable=False),
        sa.Column("model", sa.String(256), nullable=False),
        sa.Column("batch_id", sa.String(64), nullable=False),
        sa.Column("minute", sa.BigInteger(), nullable=False),
        sa.Column("kind", sa.String(16), nullable=False),
        sa.Column("input_tokens", sa.BigInteger(), nullable=False),
        sa.Column("cached_tokens", sa.BigInteger(), nullable=False),
        sa.Column("output_tokens", sa.BigInteger(), nullable=False),
        sa.Column("requests", sa.Integer(), nullable=False),
        sa.PrimaryKeyConstraint("project", "model", "batch_id", "minute", name="pk_usage_minutes"),
    )
    op.create_index("ix_usage_minutes_kind_minute", "usage_minutes", ["kind", "minute"])
    with op.batch_alter_table("batches") as batch:
        batch.add_column(sa.Column("prompt_tokens", sa.BigInteger(), nullable=True))


def downgrade() -> None:
    with op.batch_alter_table("batches") as batch:
        batch.drop_column("prompt_tokens")
    op.drop_index("ix_usage_minutes_kind_minute", table_name="usage_minutes")
    op.drop_table("usage_minutes")
