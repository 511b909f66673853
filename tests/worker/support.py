"""Rows put straight into a migrated database (tests/support/database.py), for driving the
worker's claim, lease and finalize decisions without a server or an engine."""

from __future__ import annotations

from app.core.chunk_format import encode
from app.core.statuses import BatchStatus
from app.db.engine import Database
from app.db.models import Batch
from app.db.repositories.batches import BatchRepository, Claim, LineRow
from app.db.repositories.shards import ShardClaim, ShardRepository, ShardSpan
from app.storage.base import BlobStore

PROJECT = "p"
LEASE = 10.0
# Far in the future: a batch that does not expire during a test.
NEVER = 2**40


async def add_batch(
    db: Database, batch_id: str, status: BatchStatus, *, input_file_id: str = "file-in", **columns
) -> None:
    """A batch row of PROJECT's; `columns` set any other column (expires_at is NEVER unless given)."""
    async with db.write() as session:
        session.add(
            Batch(
                id=batch_id,
                project=PROJECT,
                endpoint="/v1/chat/completions",
                input_file_id=input_file_id,
                completion_window="24h",
                status=status,
                created_at=0,
                **{"expires_at": NEVER, **columns},
            )
        )


async def add_shards(db: Database, batch_id: str, spans: list[ShardSpan]) -> None:
    async with db.write() as session:
        await ShardRepository(session).add_all(batch_id, spans)


async def load(db: Database, batch_id: str) -> Batch:
    async with db.read() as session:
        batch = await BatchRepository(session).load(batch_id)
    assert batch is not None
    return batch


async def claim_batch(
    db: Database, owner: str, now: float, skip: tuple[str, ...] = (), only: str | None = None
) -> Claim | None:
    async with db.write() as session:
        return await BatchRepository(session).claim(owner, now, LEASE, list(skip), only=only)


async def claim_shard(db: Database, owner: str, now: float, **kwargs) -> ShardClaim | None:
    async with db.write() as session:
        return await ShardRepository(session).claim(owner, now, LEASE, **kwargs)


async def record(db: Database, store: BlobStore, claim: ShardClaim, rows: list[LineRow], blob_id: str) -> int:
    """What a checkpoint write does: the chunk's blob first, then its row and the counters."""
    writer = store.new_writer(PROJECT, blob_id)
    writer.write(encode(rows))
    await store.commit(writer, PROJECT, blob_id)
    async with db.write() as session:
        return await ShardRepository(session).record_lines(claim, rows, blob_id)
