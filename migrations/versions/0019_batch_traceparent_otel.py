"""batches.traceparent: the W3C trace context of the request that created the batch, so every
replica's steps of the batch join one OpenTelemetry trace

Revision ID: 0019
Revises: 0018
Create Date: 2026-11-26
"""

import sqlalchemy as sa
from alembic import op

revision = "0019"
down_revision = "0018"
branch_labels = None
depends_on = None


def upgrade() -> None:
    with op.batch_alter_table("batches") as batches:
        batches.add_column(sa.Column("traceparent", sa.String(64), nullable=True))


def downgrade() -> None:
    with op.batch_alter_table("batches") as batches:
        batches.drop_column("traceparent")
