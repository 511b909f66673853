"""projects.retention_days: the project's files and batch outputs are deleted this many days after
they were made (None: kept until they expire)

Revision ID: 0023
Revises: 0022
Create Date: 2026-11-28
"""

import sqlalchemy as sa
from alembic import op

revision = "0023"
down_revision = "0022"
branch_labels = None
depends_on = None


def upgrade() -> None:
    with op.batch_alter_table("projects") as projects:
        projects.add_column(sa.Column("retention_days", sa.Integer(), nullable=True))
        projects.create_check_constraint(
            op.f("ck_projects_retention_days_positive"), "retention_days IS NULL OR retention_days >= 1"
        )


def downgrade() -> None:
    with op.batch_alter_table("projects") as projects:
        projects.drop_constraint(op.f("ck_projects_retention_days_positive"), type_="check")
        projects.drop_column("retention_days")
