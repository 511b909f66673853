"""batches.deleted_at: a deleted batch stays a tombstone (its id a list cursor) until purged

Revision ID: 0017
Revises: 0016
Create Date: 2026-11-26
"""

import sqlalchemy as sa
from alembic import op

revision = "0017"
down_revision = "0016"
branch_labels = None
depends_on = None


def upgrade() -> None:
    with op.batch_alter_table("batches") as batches:
        batches.add_column(sa.Column("deleted_at", sa.BigInteger(), nullable=True))


def downgrade() -> None:
    with op.batch_alter_table("batches") as batches:
        batches.drop_column("deleted_at")
