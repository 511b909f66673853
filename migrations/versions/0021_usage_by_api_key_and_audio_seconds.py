"""The API key behind each batch and usage row (Usage and Costs API by api_key_id), and the
audio seconds of transcription lines (usage under audio_transcriptions)

Revision ID: 0021
Revises: 0020
Create Date: 2026-11-26
"""

import sqlalchemy as sa
from alembic import op

revision = "0021"
down_revision = "0020"
branch_labels = None
depends_on = None


def upgrade() -> None:
    with op.batch_alter_table("batches") as batches:
        batches.add_column(sa.Column("api_key_id", sa.String(64), nullable=True))
    with op.batch_alter_table("usage_minutes") as usage:
        usage.add_column(sa.Column("api_key_id", sa.String(64), nullable=True))
        usage.add_column(sa.Column("seconds", sa.BigInteger(), nullable=False, server_default="0"))
        usage.alter_column("kind", type_=sa.String(32), existing_type=sa.String(16), existing_nullable=False)


def downgrade() -> None:
    with op.batch_alter_table("usage_minutes") as usage:
        usage.alter_column("kind", type_=sa.String(16), existing_type=sa.String(32), existing_nullable=False)
        usage.drop_column("seconds")
        usage.drop_column("api_key_id")
    with op.batch_alter_table("batches") as batches:
        batches.drop_column("api_key_id")
