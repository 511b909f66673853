"""batch_prompt_tokens (a batch's enqueued prompt tokens per model: a Message Batch may name
several) and projects.completion_windows (the windows a project may use; null: the server's)

Revision ID: 0016
Revises: 0015
Create Date: 2026-11-26

Unfinished batches counted before the upgrade keep their count under their one model.
"""

import sqlalchemy as sa
from alembic import op

revision = "0016"
down_revision = "0015"
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.create_table(
        "batch_prompt_tokens",
        sa.Column("batch_id", sa.String(64), nullable=False),
        sa.Column("model", sa.String(256), nullable=False),
        sa.Column("tokens", sa.BigInteger(), nullable=False),
        sa.ForeignKeyConstraint(
            ["batch_id"], ["batches.id"], name=op.f("fk_batch_prompt_tokens_batch_id_batches"), ondelete="CASCADE"
        ),
        sa.PrimaryKeyConstraint("batch_id", "model", name=op.f("pk_batch_prompt_tokens")),
    )
    op.execute(
        "INSERT INTO batch_prompt_tokens (batch_id, model, tokens) "
        "SELECT id, model, prompt_tokens FROM batches WHERE prompt_tokens IS NOT NULL AND model IS NOT NULL "
        "AND status IN ('validating', 'in_progress', 'finalizing')"
    )
    with op.batch_alter_table("projects") as projects:
        projects.add_column(sa.Column("completion_windows", sa.String(256), nullable=True))


def downgrade() -> None:
    with op.batch_alter_table("projects") as projects:
        projects.drop_column("completion_windows")
    op.drop_table("batch_prompt_tokens")
