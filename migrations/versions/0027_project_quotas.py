"""projects.max_bytes and projects.max_active_batches: a project's own stored-bytes and
active-batch limits (None: BATCHD_PROJECT_MAX_BYTES / BATCHD_PROJECT_MAX_ACTIVE_BATCHES; 0: none)

Revision ID: 0027
Revises: 0026
Create Date: 2026-12-01
"""

import sqlalchemy as sa
from alembic import op

revision = "0027"
down_revision = "0026"
branch_labels = None
depends_on = None


def upgrade() -> None:
    with op.batch_alter_table("projects") as projects:
        projects.add_column(sa.Column("max_bytes", sa.BigInteger(), nullable=True))
        projects.add_column(sa.Column("max_active_batches", sa.BigInteger(), nullable=True))
        projects.create_check_constraint(
            op.f("ck_projects_max_bytes_not_negative"), "max_bytes IS NULL OR max_bytes >= 0"
        )
        projects.create_check_constraint(
            op.f("ck_projects_max_active_batches_not_negative"), "max_active_batches IS NULL OR max_active_batches >= 0"
        )


def downgrade() -> None:
    with op.batch_alter_table("projects") as projects:
        projects.drop_constraint(op.f("ck_projects_max_active_batches_not_negative"), type_="check")
        projects.drop_constraint(op.f("ck_projects_max_bytes_not_negative"), type_="check")
        projects.drop_column("max_active_batches")
        projects.drop_column("max_bytes")
