"""Results by reference: batches.output_uri (an `s3://` prefix) or batches.output_urls (presigned
PUT URLs by file kind, a JSON object) a batch's output and error files are copied to when it
ends; batches.export_status (None: no export; "pending", "completed", "failed"),
export_error (the last attempt's error, a JSON object), export_attempts, export_next_at (when
the next attempt is due, or until when a replica's attempt holds it)

Revision ID: 0031
Revises: 0030
Create Date: 2026-12-02
"""

import sqlalchemy as sa
from alembic import op

revision = "0031"
down_revision = "0030"
branch_labels = None
depends_on = None


def upgrade() -> None:
    with op.batch_alter_table("batches") as batches:
        batches.add_column(sa.Column("output_uri", sa.Text(), nullable=True))
        batches.add_column(sa.Column("output_urls", sa.JSON(), nullable=True))
        batches.add_column(sa.Column("export_status", sa.String(16), nullable=True))
        batches.add_column(sa.Column("export_error", sa.JSON(), nullable=True))
        batches.add_column(sa.Column("export_attempts", sa.Integer(), nullable=False, server_default="0"))
        batches.add_column(sa.Column("export_next_at", sa.Float(), nullable=True))
        batches.create_index("ix_batches_export_status", ["export_status"])


def downgrade() -> None:
    with op.batch_alter_table("batches") as batches:
        batches.drop_index("ix_batches_export_status")
        batches.drop_column("export_next_at")
        batches.drop_column("export_attempts")
        batches.drop_column("export_error")
        batches.drop_column("export_status")
        batches.drop_column("output_urls")
        batches.drop_column("output_uri")
