"""checkpoint chunks: finished lines' results move out of the database, into blobs

Revision ID: 0015
Revises: 0014
Create Date: 2026-11-25

Lines already checkpointed in `batch_lines` (batches in flight during the upgrade) become
chunks that hold their lines in `payload`, one per shard, so none of them runs again.
"""

import sys
from array import array

import sqlalchemy as sa
from alembic import op

revision = "0015"
down_revision = "0014"
branch_labels = None
depends_on = None


def upgrade() -> None:
    chunks = op.create_table(
        "batch_chunks",
        sa.Column("id", sa.Integer(), autoincrement=True, nullable=False),
        sa.Column("batch_id", sa.String(64), nullable=False),
        sa.Column("shard_no", sa.Integer(), nullable=False),
        sa.Column("blob_id", sa.String(64), nullable=True),
        sa.Column("payload", sa.LargeBinary(), nullable=True),
        sa.Column("line_nos", sa.LargeBinary(), nullable=False),
        sa.Column("lines", sa.Integer(), nullable=False),
        sa.ForeignKeyConstraint(
            ["batch_id"], ["batches.id"], name=op.f("fk_batch_chunks_batch_id_batches"), ondelete="CASCADE"
        ),
        sa.PrimaryKeyConstraint("id", name=op.f("pk_batch_chunks")),
    )
    op.create_index("ix_batch_chunks_batch_id_shard_no", "batch_chunks", ["batch_id", "shard_no"])
    _carry_over(chunks)
    op.drop_table("batch_lines")


def _carry_over(chunks: sa.Table) -> None:
    rows = op.get_bind().execute(
        sa.text(
            "SELECT l.batch_id, s.shard_no, l.line_no, l.ok, l.line FROM batch_lines l "
            "JOIN batch_shards s ON s.batch_id = l.batch_id AND l.line_no >= s.first_line "
            "AND l.line_no < s.end_line ORDER BY l.batch_id, s.shard_no, l.line_no"
        )
    )
    key, payload, line_nos = None, [], array("I")

    def flush() -> None:
        if key is None:
            return
        if sys.byteorder == "big":
            line_nos.byteswap()
        op.bulk_insert(
            chunks,
            [
                {
                    "batch_id": key[0],
                    "shard_no": key[1],
                    "payload": b"".join(payload),
                    "line_nos": line_nos.tobytes(),
                    "lines": len(line_nos),
                }
            ],
        )

    for batch_id, shard_no, line_no, ok, line in rows:
        if (batch_id, shard_no) != key:
            flush()
            key, payload, line_nos = (batch_id, shard_no), [], array("I")
        payload.append(b"%d %d %s\n" % (line_no, bool(ok), line.encode()))
        line_nos.append(line_no)
    flush()


def downgrade() -> None:
    op.create_table(
        "batch_lines",
        sa.Column("id", sa.Integer(), autoincrement=True, nullable=False),
        sa.Column("batch_id", sa.String(64), nullable=False),
        sa.Column("line_no", sa.Integer(), nullable=False),
        sa.Column("ok", sa.Boolean(), nullable=False),
        sa.Column("line", sa.Text(), nullable=False),
        sa.ForeignKeyConstraint(
            ["batch_id"], ["batches.id"], name=op.f("fk_batch_lines_batch_id_batches"), ondelete="CASCADE"
        ),
        sa.PrimaryKeyConstraint("id", name=op.f("pk_batch_lines")),
        sa.UniqueConstraint("batch_id", "line_no", name="uq_batch_lines_batch_id_line_no"),
    )
    op.drop_index("ix_batch_chunks_batch_id_shard_no", table_name="batch_chunks")
    op.drop_table("batch_chunks")
