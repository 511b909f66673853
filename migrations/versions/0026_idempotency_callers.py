"""idempotency_keys: a record belongs to the API key that made it (its id and admin flag), says
whether the route's own transaction committed, keeps a retrieve path in place of a body that
carried a secret (or did not fit), and counts its body's bytes (the project's storage)

The table is made anew: its records are a day's retry protection at most, and the old ones may
hold the secrets of keys minted with an Idempotency-Key (docs/security.md).

Revision ID: 0026
Revises: 0025
Create Date: 2026-12-01
"""

import sqlalchemy as sa
from alembic import op

revision = "0026"
down_revision = "0025"
branch_labels = None
depends_on = None


def _create(columns: list[sa.Column], primary_key: list[str]) -> None:
    op.create_table(
        "idempotency_keys",
        *columns,
        sa.PrimaryKeyConstraint(*primary_key, name=op.f("pk_idempotency_keys")),
    )
    op.create_index(op.f("ix_idempotency_keys_created_at"), "idempotency_keys", ["created_at"])


def _common() -> list[sa.Column]:
    return [
        sa.Column("project", sa.String(128), nullable=False),
        sa.Column("key", sa.String(255), nullable=False),
        sa.Column("created_at", sa.Float(), nullable=False),
        sa.Column("owner", sa.String(64), nullable=True),
        sa.Column("locked_until", sa.Float(), nullable=True),
        sa.Column("fingerprint", sa.String(64), nullable=True),
        sa.Column("status_code", sa.Integer(), nullable=True),
        sa.Column("content_type", sa.String(255), nullable=True),
        sa.Column("body", sa.LargeBinary(), nullable=True),
    ]


def upgrade() -> None:
    op.drop_index(op.f("ix_idempotency_keys_created_at"), table_name="idempotency_keys")
    op.drop_table("idempotency_keys")
    _create(
        [
            *_common(),
            sa.Column("api_key_id", sa.String(64), nullable=False, server_default=""),
            sa.Column("is_admin", sa.Boolean(), nullable=False, server_default=sa.false()),
            sa.Column("committed", sa.Boolean(), nullable=False, server_default=sa.false()),
            sa.Column("retrieve_path", sa.String(1024), nullable=True),
            sa.Column("stored_bytes", sa.Integer(), nullable=False, server_default="0"),
        ],
        ["project", "api_key_id", "key"],
    )


def downgrade() -> None:
    op.drop_index(op.f("ix_idempotency_keys_created_at"), table_name="idempotency_keys")
    op.drop_table("idempotency_keys")
    _create(_common(), ["project", "key"])
