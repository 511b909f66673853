"""batches.ordered_input: the blob holding a batch's lines in prompt-prefix order, which its shards
are cut from (None: the shards are byte ranges of the input file itself)

Revision ID: 0022
Revises: 0021
Create Date: 2026-11-27
"""

import sqlalchemy as sa
from alembic import op

revision = "0022"
down_revision = "0021"
branch_labels = None
depends_on = None


def upgrade() -> None:
    with op.batch_alter_table("batches") as batches:
        batches.add_column(sa.Column("ordered_input", sa.String(96), nullable=True))


def downgrade() -> None:
    with op.batch_alter_table("batches") as batches:
        batches.drop_column("ordered_input")
