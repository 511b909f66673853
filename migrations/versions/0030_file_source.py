"""projects.allowed_import_uris: the `s3://bucket/prefix/` URIs a project may import files from
(a JSON list; None: only BATCHD_IMPORT_ALLOWED_URIS); files.source_url: where an imported file
came from (its URL without query string; None: uploaded)

Revision ID: 0030
Revises: 0029
Create Date: 2026-12-02
"""

import sqlalchemy as sa
from alembic import op

revision = "0030"
down_revision = "0029"
branch_labels = None
depends_on = None


def upgrade() -> None:
    with op.batch_alter_table("projects") as projects:
        projects.add_column(sa.Column("allowed_import_uris", sa.JSON(), nullable=True))
    with op.batch_alter_table("files") as files:
        files.add_column(sa.Column("source_url", sa.Text(), nullable=True))


def downgrade() -> None:
    with op.batch_alter_table("files") as files:
        files.drop_column("source_url")
    with op.batch_alter_table("projects") as projects:
        projects.drop_column("allowed_import_uris")
