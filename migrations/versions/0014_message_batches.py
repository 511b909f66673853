"""message batches: which API a batch belongs to, and how many lines never ran

Revision ID: 0014
Revises: 0010
Create Date: 2026-11-25
"""

import sqlalchemy as sa
from alembic import op

revision = "0014"
down_revision = "0010"
branch_labels = None
depends_on = None


def upgrade() -> None:
    with op.batch_alter_table("batches") as batch_op:
        batch_op.add_column(sa.Column("api", sa.String(16), nullable=False, server_default="openai"))
        batch_op.add_column(sa.Column("unexecuted", sa.Integer(), nullable=False, server_default="0"))
        batch_op.create_index("ix_batches_project_api_seq", ["project", "api", "seq"])


def downgrade() -> None:
    with op.batch_alter_table("batches") as batch_op:
        batch_op.drop_index("ix_batches_project_api_seq")
        batch_op.drop_column("unexecuted")
        batch_op.drop_column("api")
