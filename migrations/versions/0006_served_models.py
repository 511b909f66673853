"""served_models: the models each replica with engines serves (listed by --api-only replicas)

Revision ID: 0006
Revises: 0005
Create Date: 2026-11-25
"""

import sqlalchemy as sa
from alembic import op

revision = "0006"
down_revision = "0005"
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.create_table(
        "served_models",
        sa.Column("replica", sa.String(128), nullable=False),
        sa.Column("model_id", sa.String(256), nullable=False),
        sa.Column("created", sa.BigInteger(), nullable=False),
        sa.Column("owned_by", sa.String(128), nullable=False),
        sa.Column("engine_state", sa.String(16), nullable=False),
        sa.Column("lines_in_flight", sa.Integer(), nullable=False),
        sa.Column("lines_waiting", sa.Integer(), nullable=False),
        sa.Column("max_lines_in_flight", sa.Integer(), nullable=False),
        sa.Column("published_at", sa.Float(), nullable=False),
        sa.PrimaryKeyConstraint("replica", "model_id", name=op.f("pk_served_models")),
    )


def downgrade() -> None:
    op.drop_table("served_models")
