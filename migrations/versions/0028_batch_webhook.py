"""batches.allow_mixed_models: a batch whose lines may name different models (each line runs on
its own; a line naming a model the project cannot use fails alone); webhook_endpoints.batch_id:
an endpoint bound to one batch (its `webhook` on create), removed once its event is sent

Revision ID: 0028
Revises: 0027
Create Date: 2026-12-02
"""

import sqlalchemy as sa
from alembic import op

revision = "0028"
down_revision = "0027"
branch_labels = None
depends_on = None


def upgrade() -> None:
    with op.batch_alter_table("batches") as batches:
        batches.add_column(sa.Column("allow_mixed_models", sa.Boolean(), nullable=False, server_default=sa.false()))
    with op.batch_alter_table("webhook_endpoints") as endpoints:
        endpoints.add_column(sa.Column("batch_id", sa.String(64), nullable=True))
        endpoints.create_index("ix_webhook_endpoints_batch_id", ["batch_id"])


def downgrade() -> None:
    with op.batch_alter_table("webhook_endpoints") as endpoints:
        endpoints.drop_index("ix_webhook_endpoints_batch_id")
        endpoints.drop_column("batch_id")
    with op.batch_alter_table("batches") as batches:
        batches.drop_column("allow_mixed_models")
