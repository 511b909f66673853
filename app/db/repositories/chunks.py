"""SQL for checkpoint chunks (app/core/chunk_format.py has their format): which lines of a shard are
recorded, and in which blobs."""

from __future__ import annotations

from collections.abc import AsyncIterator, Sequence
from typing import cast

from sqlalchemy import Table, delete, func, insert, select
from sqlalchemy.ext.asyncio import AsyncSession

from app.core.statuses import TERMINAL_BATCH_STATUSES
from app.db.models import Batch, BatchChunk

_ADD_CHUNK = insert(cast(Table, BatchChunk.__table__))
# When a batch ended, whichever way.
_ENDED_AT = func.coalesce(Batch.completed_at, Batch.cancelled_at, Batch.expired_at, Batch.failed_at)


class ChunkRepository:
    def __init__(self, session: AsyncSession) -> None:
        self.session = session

    async def add(self, batch_id: str, shard_no: int, blob_id: str, line_nos: bytes, lines: int) -> None:
        # A plain INSERT, once a checkpoint, built once: nothing reads the row back through the
        # session, so the ORM's unit of work (an object in the identity map, a flush) is not needed.
        values = {"batch_id": batch_id, "shard_no": shard_no, "blob_id": blob_id, "line_nos": line_nos, "lines": lines}
        await self.session.execute(_ADD_CHUNK, values)

    async def line_nos_of_shard(self, batch_id: str, shard_no: int) -> Sequence[bytes]:
        result = await self.session.execute(
            select(BatchChunk.line_nos).where(BatchChunk.batch_id == batch_id, BatchChunk.shard_no == shard_no)
        )
        return result.scalars().all()

    async def count_of_shard(self, batch_id: str, shard_no: int) -> int:
        result = await self.session.execute(
            select(func.coalesce(func.sum(BatchChunk.lines), 0)).where(
                BatchChunk.batch_id == batch_id, BatchChunk.shard_no == shard_no
            )
        )
        return int(result.scalar_one())

    async def of_batch(self, batch_id: str) -> AsyncIterator[BatchChunk]:
        """The batch's chunks by shard (in line order of the shards), fetched a few at a time."""
        result = await self.session.stream(
            select(BatchChunk)
            .where(BatchChunk.batch_id == batch_id)
            .order_by(BatchChunk.shard_no, BatchChunk.id)
            .execution_options(yield_per=64)
        )
        async for chunk in result.scalars():
            yield chunk

    async def last_id(self, batch_id: str) -> int:
        """The id of the batch's newest chunk (0 if none): a batch's chunk ids grow in commit order."""
        result = await self.session.execute(
            select(func.coalesce(func.max(BatchChunk.id), 0)).where(BatchChunk.batch_id == batch_id)
        )
        return int(result.scalar_one())

    async def page(self, batch_id: str, after_id: int, upto_id: int, limit: int) -> Sequence[BatchChunk]:
        """The batch's chunks with ids in (after_id, upto_id], oldest first, at most `limit`."""
        result = await self.session.execute(
            select(BatchChunk)
            .where(BatchChunk.batch_id == batch_id, BatchChunk.id > after_id, BatchChunk.id <= upto_id)
            .order_by(BatchChunk.id)
            .limit(limit)
        )
        return result.scalars().all()

    async def delete_of_batch(self, batch_id: str) -> list[str]:
        """Delete a batch's chunks; returns their blob ids, to delete after the commit."""
        result = await self.session.execute(
            delete(BatchChunk).where(BatchChunk.batch_id == batch_id).returning(BatchChunk.blob_id)
        )
        return [blob_id for (blob_id,) in result.all() if blob_id is not None]

    async def take_expired(self, now: int, default_ttl: int, limit: int) -> list[tuple[str, str]]:
        """Delete up to `limit` chunks of ended batches whose results expired (as their output
        files do: `output_expires_after`, else `default_ttl`, after the end); returns (project,
        blob id) of each, to delete after the commit."""
        ttl = func.coalesce(Batch.output_expires_after, default_ttl)
        result = await self.session.execute(
            select(BatchChunk.id, Batch.project, BatchChunk.blob_id)
            .join(Batch, Batch.id == BatchChunk.batch_id)
            .where(Batch.status.in_(TERMINAL_BATCH_STATUSES), _ENDED_AT + ttl <= now)
            .limit(limit)
        )
        rows = result.all()
        if rows:
            await self.session.execute(delete(BatchChunk).where(BatchChunk.id.in_([row.id for row in rows])))
        return [(project, blob_id) for _, project, blob_id in rows if blob_id is not None]

    async def batches_ended_before(self, project: str, cutoff: int, limit: int) -> list[str]:
        """Ids of the project's batches that ended at or before `cutoff` and still have results."""
        has_results = select(BatchChunk.id).where(BatchChunk.batch_id == Batch.id).exists()
        result = await self.session.execute(
            select(Batch.id)
            .where(
                Batch.project == project,
                Batch.status.in_(TERMINAL_BATCH_STATUSES),
                _ENDED_AT <= cutoff,
                has_results,
            )
            .order_by(Batch.seq)
            .limit(limit)
        )
        return list(result.scalars().all())

    async def blob_ids(self) -> AsyncIterator[tuple[str, str]]:
        """(project, blob id) of every chunk: blobs the store holds for batches in flight."""
        result = await self.session.stream(
            select(Batch.project, BatchChunk.blob_id).join(Batch, Batch.id == BatchChunk.batch_id)
        )
        async for project, blob_id in result:
            if blob_id is not None:
                yield project, blob_id


__all__ = ["ChunkRepository"]
