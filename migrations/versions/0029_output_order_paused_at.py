"""batches.output_order: "completion" (the default) or "input" (the output and error files list
lines in input order); batches.paused_at: when a running batch was paused (None: it runs)

Revision ID: 0029
Revises: 0028
Create Date: 2026-12-02
"""

import sqlalchemy as sa
from alembic import op

revision = "0029"
down_revision = "0028"
branch_labels = None
depends_on = None


def upgrade() -> None:
    with op.batch_alter_table("batches") as batches:
        batches.add_column(sa.Column("output_order", sa.String(16), nullable=False, server_default="completion"))
        batches.add_column(sa.Column("paused_at", sa.BigInteger(), nullable=True))


def downgrade() -> None:
    with op.batch_alter_table("batches") as batches:
        batches.drop_column("paused_at")
        batches.drop_column("output_order")
