"""CHECK constraints on every status column: only the values of app/core/statuses.py's enums

The values are written out here rather than read from the enums: a migration is a fixed step in
the schema's history (tests/db/test_status_checks.py checks that they match the enums). A status
added later gets its own migration replacing the constraint.

Revision ID: 0007
Revises: 0006
Create Date: 2026-11-25
"""

from alembic import op

revision = "0007"
down_revision = "0006"
branch_labels = None
depends_on = None

STATUSES = {
    "batches": ("validating", "failed", "in_progress", "finalizing", "completed", "expired", "cancelling", "cancelled"),
    "batch_shards": ("pending", "running", "done"),
    "uploads": ("pending", "completed", "cancelled", "expired"),
    "webhook_endpoints": ("enabled", "disabled"),
    "webhook_deliveries": ("pending", "delivered", "failed"),
}


def upgrade() -> None:
    # Batch mode: SQLite cannot add a constraint to a table, so the table is copied into a new one.
    for table, values in STATUSES.items():
        with op.batch_alter_table(table) as batch:
            batch.create_check_constraint(
                op.f(f"ck_{table}_status"), "status IN ({})".format(", ".join(f"'{v}'" for v in values))
            )


def downgrade() -> None:
    for table in reversed(STATUSES):
        with op.batch_alter_table(table) as batch:
            batch.drop_constraint(op.f(f"ck_{table}_status"), type_="check")
