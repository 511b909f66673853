"""projects: per-project weight and token limit; admin API keys

Revision ID: 0008
Revises: 0007
Create Date: 2026-11-25
"""

import sqlalchemy as sa
from alembic import op

revision = "0008"
down_revision = "0007"
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.create_table(
        "projects",
        sa.Column("name", sa.String(128), nullable=False),
        sa.Column("weight", sa.Integer(), nullable=False),
        sa.Column("max_enqueued_tokens", sa.BigInteger(), nullable=True),
        sa.Column("updated_at", sa.BigInteger(), nullable=False),
        sa.PrimaryKeyConstraint("name", name=op.f("pk_projects")),
        sa.CheckConstraint("weight >= 1", name=op.f("ck_projects_weight_positive")),
        sa.CheckConstraint(
            "max_enqueued_tokens IS NULL OR max_enqueued_tokens >= 0",
            name=op.f("ck_projects_max_enqueued_tokens_not_negative"),
        ),
    )
    with op.batch_alter_table("api_keys") as batch:
        batch.add_column(sa.Column("is_admin", sa.Boolean(), nullable=False, server_default=sa.false()))


def downgrade() -> None:
    with op.batch_alter_table("api_keys") as batch:
        batch.drop_column("is_admin")
    op.drop_table("projects")
