"""Administration API: project titles and archiving, key names, the audit log, daily rate limits, model permissions

Revision ID: 0020
Revises: 0019
Create Date: 2026-11-26
"""

import sqlalchemy as sa
from alembic import op

revision = "0020"
down_revision = "0019"
branch_labels = None
depends_on = None


def upgrade() -> None:
    with op.batch_alter_table("projects") as projects:
        projects.add_column(sa.Column("title", sa.String(256), nullable=True))
        projects.add_column(sa.Column("created_at", sa.BigInteger(), nullable=True))
        projects.add_column(sa.Column("archived_at", sa.BigInteger(), nullable=True))
        projects.add_column(sa.Column("model_permissions_mode", sa.String(16), nullable=True))
        projects.add_column(sa.Column("model_ids", sa.Text(), nullable=True))
    with op.batch_alter_table("api_keys") as api_keys:
        api_keys.add_column(sa.Column("name", sa.String(256), nullable=True))
        api_keys.create_index("ix_api_keys_project", ["project"])
    op.create_table(
        "audit_logs",
        sa.Column("seq", sa.Integer(), autoincrement=True, nullable=False),
        sa.Column("type", sa.String(64), nullable=False),
        sa.Column("effective_at", sa.BigInteger(), nullable=False),
        sa.Column("resource_id", sa.String(128), nullable=False),
        sa.Column("project_id", sa.String(128), nullable=True),
        sa.Column("actor_key_id", sa.String(64), nullable=True),
        sa.Column("details", sa.Text(), nullable=False),
        sa.PrimaryKeyConstraint("seq", name=op.f("pk_audit_logs")),
    )
    op.create_index("ix_audit_logs_effective_at", "audit_logs", ["effective_at"])
    op.create_table(
        "project_rate_limits",
        sa.Column("project", sa.String(128), nullable=False),
        sa.Column("model", sa.String(256), nullable=False),
        sa.Column("batch_1_day_max_input_tokens", sa.BigInteger(), nullable=True),
        sa.Column("max_requests_per_1_day", sa.BigInteger(), nullable=True),
        sa.Column("updated_at", sa.BigInteger(), nullable=False),
        sa.PrimaryKeyConstraint("project", "model", name=op.f("pk_project_rate_limits")),
    )


def downgrade() -> None:
    op.drop_table("project_rate_limits")
    op.drop_index("ix_audit_logs_effective_at", table_name="audit_logs")
    op.drop_table("audit_logs")
    with op.batch_alter_table("api_keys") as api_keys:
        api_keys.drop_index("ix_api_keys_project")
        api_keys.drop_column("name")
    with op.batch_alter_table("projects") as projects:
        projects.drop_column("model_ids")
        projects.drop_column("model_permissions_mode")
        projects.drop_column("archived_at")
        projects.drop_column("created_at")
        projects.drop_column("title")
