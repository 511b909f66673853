"""batches.due_at: the deadline the scheduler orders work by when it is not the hard expiry
(a background response is due within its short-deadline lane but expires much later)

Revision ID: 0025
Revises: 0024
Create Date: 2026-11-28
"""

import sqlalchemy as sa
from alembic import op

revision = "0025"
down_revision = "0024"
branch_labels = None
depends_on = None


def upgrade() -> None:
    with op.batch_alter_table("batches") as batches:
        batches.add_column(sa.Column("due_at", sa.BigInteger(), nullable=True))


def downgrade() -> None:
    with op.batch_alter_table("batches") as batches:
        batches.drop_column("due_at")
