"""batch_shards: batches cut into shards that any replica can claim

Revision ID: 0003
Revises: 0002
Create Date: 2026-11-23
"""

import sqlalchemy as sa
from alembic import op

revision = "0003"
down_revision = "0002"
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.create_table(
        "batch_shards",
        sa.Column("id", sa.Integer(), autoincrement=True, nullable=False),
        sa.Column("batch_id", sa.String(64), sa.ForeignKey("batches.id", ondelete="CASCADE"), nullable=False),
        sa.Column("shard_no", sa.Integer(), nullable=False),
        sa.Column("first_line", sa.Integer(), nullable=False),
        sa.Column("end_line", sa.Integer(), nullable=False),
        sa.Column("start_offset", sa.BigInteger(), nullable=False),
        sa.Column("end_offset", sa.BigInteger(), nullable=True),
        sa.Column("lines", sa.Integer(), nullable=False),
        sa.Column("status", sa.String(16), nullable=False),
        sa.Column("lease_owner", sa.String(128), nullable=True),
        sa.Column("lease_expires_at", sa.Float(), nullable=True),
        sa.Column("fence", sa.Integer(), nullable=False),
        sa.Column("replica", sa.String(128), nullable=True),
        sa.Column("taken_over", sa.Integer(), nullable=False),
        sa.Column("lines_done", sa.Integer(), nullable=False),
        sa.Column("started_at", sa.Float(), nullable=True),
        sa.Column("finished_at", sa.Float(), nullable=True),
        sa.PrimaryKeyConstraint("id"),
        sa.UniqueConstraint("batch_id", "shard_no", name="uq_batch_shards_batch_id_shard_no"),
    )
    op.create_index("ix_batch_shards_status", "batch_shards", ["status"])
    # Replica ids (host name + pid, or BATCHD_REPLICA_ID) can be longer than the old owner ids.
    with op.batch_alter_table("batches") as batch:
        batch.alter_column("lease_owner", type_=sa.String(128), existing_nullable=True)


def downgrade() -> None:
    with op.batch_alter_table("batches") as batch:
        batch.alter_column("lease_owner", type_=sa.String(64), existing_nullable=True)
    op.drop_index("ix_batch_shards_status", "batch_shards")
    op.drop_table("batch_shards")
