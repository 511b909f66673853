"""batches.retry_of: the batch whose unsuccessful lines a retry runs again

Revision ID: 0018
Revises: 0017
Create Date: 2026-11-26
"""

import sqlalchemy as sa
from alembic import op

revision = "0018"
down_revision = "0017"
branch_labels = None
depends_on = None


def upgrade() -> None:
    with op.batch_alter_table("batches") as batches:
        batches.add_column(sa.Column("retry_of", sa.String(64), nullable=True))


def downgrade() -> None:
    with op.batch_alter_table("batches") as batches:
        batches.drop_column("retry_of")
