"""SQL for batch shards: created at validation, claimed by any replica, checkpointed, done.

Claims are atomic (Postgres `FOR UPDATE SKIP LOCKED`; on SQLite the single writer makes the
same `UPDATE ... WHERE id = (SELECT ...) RETURNING` atomic). Every write a runner makes is
conditioned on the shard's fence, so a replica whose lease was taken over (or whose batch was
sealed for finalize) writes nothing: LeaseLost."""

from __future__ import annotations

from collections.abc import Sequence
from collections.abc import Set as AbstractSet
from dataclasses import dataclass
from typing import cast

from sqlalchemy import Table, and_, bindparam, case, func, or_, select, update
from sqlalchemy.ext.asyncio import AsyncSession

from app.core.chunk_format import pack_line_nos, unpack_line_nos
from app.core.statuses import BatchStatus, ShardStatus
from app.db.base import rowcount
from app.db.models import Batch, BatchShard
from app.db.repositories.batches import LeaseLost, LineRow
from app.db.repositories.chunks import ChunkRepository
from app.db.repositories.usage import UsageKey, UsageRepository

_shard = cast(Table, BatchShard.__table__).c
_batch = cast(Table, Batch.__table__).c
# A checkpoint write's two updates, built once (Core statements with bound parameters: building
# an ORM update for every write, and the ORM's bulk-update path, cost more than running it).
_ADD_LINES_DONE = (
    update(cast(Table, BatchShard.__table__))
    .where(_shard.id == bindparam("b_shard_id"), _shard.fence == bindparam("b_fence"))
    .values(lines_done=_shard.lines_done + bindparam("b_new"))
)


def _done_values(finished_at: object) -> dict:
    """What a shard's end sets (a time, or a bound parameter for the prebuilt statement)."""
    return {"status": ShardStatus.DONE, "finished_at": finished_at, "lease_owner": None, "lease_expires_at": None}


_ADD_LINES_DONE_AND_END = _ADD_LINES_DONE.values(_done_values(bindparam("b_finished_at")))
# The batch's line and token counters (columns, not their names: two are named like statuses).
_COUNTERS = tuple(
    column.name
    for column in (
        _batch.completed,
        _batch.failed,
        _batch.input_tokens,
        _batch.cached_tokens,
        _batch.output_tokens,
        _batch.reasoning_tokens,
    )
)
_ADD_TO_BATCH = (
    update(cast(Table, Batch.__table__))
    .where(_batch.id == bindparam("b_batch_id"))
    .values({name: _batch[name] + bindparam(f"b_{name}") for name in _COUNTERS})
)


@dataclass
class ShardClaim:
    shard_id: int
    batch_id: str
    shard_no: int
    fence: int
    first_line: int
    end_line: int
    start_offset: int
    end_offset: int | None
    lines: int
    taken_over: bool


@dataclass
class ShardSpan:
    """Where a shard lies in the input: lines [first_line, end_line), bytes [start, end)."""

    first_line: int
    end_line: int
    start_offset: int
    end_offset: int | None
    lines: int


class ShardRepository:
    def __init__(self, session: AsyncSession) -> None:
        self.session = session

    async def add_all(self, batch_id: str, spans: Sequence[ShardSpan]) -> None:
        self.session.add_all(
            BatchShard(
                batch_id=batch_id,
                shard_no=no,
                first_line=s.first_line,
                end_line=s.end_line,
                start_offset=s.start_offset,
                end_offset=s.end_offset,
                lines=s.lines,
                status=ShardStatus.PENDING,
                fence=0,
                taken_over=0,
                lines_done=0,
            )
            for no, s in enumerate(spans)
        )
        await self.session.flush()

    async def claim(
        self,
        owner: str,
        now: float,
        lease_seconds: float,
        skip_batches: Sequence[str] = (),
        resumed_only: bool = False,
        batch_id: str | None = None,
    ) -> ShardClaim | None:
        """Take the first free shard (pending, or running under an expired lease) of `batch_id`,
        or else of the oldest running batch not in `skip_batches` (a paused batch has none free); with `resumed_only`, only a
        shard that some replica started and gave back or abandoned."""
        claimable = or_(
            BatchShard.status == ShardStatus.PENDING,
            and_(BatchShard.status == ShardStatus.RUNNING, BatchShard.lease_expires_at < now),
        )
        if resumed_only:
            claimable = and_(claimable, BatchShard.started_at.is_not(None))
        candidate = (
            select(BatchShard.id)
            .join(Batch, Batch.id == BatchShard.batch_id)
            .where(
                Batch.status == BatchStatus.IN_PROGRESS, Batch.paused_at.is_(None), Batch.expires_at > now, claimable
            )
            .order_by(Batch.seq, BatchShard.shard_no)
            .limit(1)
            .with_for_update(skip_locked=True, of=BatchShard)
        )
        if skip_batches:
            candidate = candidate.where(BatchShard.batch_id.not_in(list(skip_batches)))
        if batch_id is not None:
            candidate = candidate.where(BatchShard.batch_id == batch_id)
        result = await self.session.execute(
            update(BatchShard)
            .where(BatchShard.id == candidate.scalar_subquery())
            .values(
                status=ShardStatus.RUNNING,
                lease_owner=owner,
                lease_expires_at=now + lease_seconds,
                fence=BatchShard.fence + 1,
                replica=owner,
                started_at=now,
                taken_over=case((BatchShard.status == ShardStatus.RUNNING, 1), else_=0),
            )
            .returning(
                BatchShard.id.label("shard_id"),
                BatchShard.batch_id,
                BatchShard.shard_no,
                BatchShard.fence,
                BatchShard.first_line,
                BatchShard.end_line,
                BatchShard.start_offset,
                BatchShard.end_offset,
                BatchShard.lines,
                BatchShard.taken_over,
            )
        )
        row = result.first()
        if row is None:
            return None
        return ShardClaim(**{**row._mapping, "taken_over": bool(row.taken_over)})

    async def _fenced_update(self, claim: ShardClaim, **values) -> bool:
        result = await self.session.execute(
            update(BatchShard).where(BatchShard.id == claim.shard_id, BatchShard.fence == claim.fence).values(**values)
        )
        return rowcount(result) == 1

    async def heartbeat(self, claim: ShardClaim, now: float, lease_seconds: float) -> None:
        if not await self._fenced_update(claim, lease_expires_at=now + lease_seconds):
            raise LeaseLost(f"{claim.batch_id} shard {claim.shard_no}")

    async def release(self, claim: ShardClaim) -> None:
        """Give the shard back at once (drain, cancel): another replica may claim it now."""
        await self.session.execute(
            update(BatchShard)
            .where(
                BatchShard.id == claim.shard_id,
                BatchShard.fence == claim.fence,
                BatchShard.status == ShardStatus.RUNNING,
            )
            .values(status=ShardStatus.PENDING, lease_owner=None, lease_expires_at=None)
        )

    async def mark_done(self, claim: ShardClaim, now: float) -> None:
        if not await self._fenced_update(claim, **_done_values(now)):
            raise LeaseLost(f"{claim.batch_id} shard {claim.shard_no}")

    async def seal(self, batch_id: str) -> None:
        """Before a batch is finalized: no runner, stale or not, may write to its shards again."""
        await self.session.execute(
            update(BatchShard)
            .where(BatchShard.batch_id == batch_id, BatchShard.status != ShardStatus.DONE)
            .values(status=ShardStatus.PENDING, fence=BatchShard.fence + 1, lease_owner=None, lease_expires_at=None)
        )

    async def record_lines(
        self,
        claim: ShardClaim,
        rows: Sequence[LineRow],
        blob_id: str,
        usage: UsageKey | None = None,
        now: float = 0.0,
        recorded: AbstractSet[int] | None = None,
        done_at: float | None = None,
    ) -> int:
        """Record the finished lines whose results the blob `blob_id` holds as one chunk (a line
        already recorded is left out of it) and add what was new to the shard's and the batch's
        counters, and to `usage`'s minute of `now`, in one transaction. Returns how many were new.
        `recorded`: the shard's recorded line numbers when the caller knows them (its own claim's
        writes since it read them: nobody else writes under its fence), else they are read.
        `done_at`: these rows are the shard's last (the caller counted them with `recorded`): the
        same fenced update marks it done, as mark_done would (a shard's last write and its end
        were two transactions, a tenth of W8's statements)."""
        if not rows:
            return 0
        chunks = ChunkRepository(self.session)
        if recorded is None:
            recorded = await self.finished_line_numbers(claim)
        new = [row for row in rows if row.line_no not in recorded]
        # Fence first: a stale runner's transaction rolls back before it touches the batch row.
        fenced = {"b_shard_id": claim.shard_id, "b_fence": claim.fence, "b_new": len(new)}
        if done_at is None:
            result = await self.session.execute(_ADD_LINES_DONE, fenced)
        else:
            result = await self.session.execute(_ADD_LINES_DONE_AND_END, {**fenced, "b_finished_at": done_at})
        if rowcount(result) != 1:
            raise LeaseLost(f"{claim.batch_id} shard {claim.shard_no}")
        if new:
            ok = sum(1 for r in new if r.ok)
            counts = {
                "b_batch_id": claim.batch_id,
                "b_completed": ok,
                "b_failed": len(new) - ok,
                "b_input_tokens": sum(r.input_tokens for r in new),
                "b_cached_tokens": sum(r.cached_tokens for r in new),
                "b_output_tokens": sum(r.output_tokens for r in new),
                "b_reasoning_tokens": sum(r.reasoning_tokens for r in new),
            }
            await self.session.execute(_ADD_TO_BATCH, counts)
            # After the batch row's update, whose lock is held to the commit: a batch's chunks
            # get their ids in the order they commit, so a results cursor (the last chunk id
            # read) never skips a chunk that commits later with a smaller id.
            await chunks.add(claim.batch_id, claim.shard_no, blob_id, pack_line_nos(r.line_no for r in new), len(new))
            if usage is not None:
                await UsageRepository(self.session).add(usage, int(now) // 60 * 60, new)
        return len(new)

    async def finished_line_numbers(self, claim: ShardClaim) -> set[int]:
        recorded: set[int] = set()
        for packed in await ChunkRepository(self.session).line_nos_of_shard(claim.batch_id, claim.shard_no):
            recorded.update(unpack_line_nos(packed))
        return recorded

    async def count_lines(self, claim: ShardClaim) -> int:
        return await ChunkRepository(self.session).count_of_shard(claim.batch_id, claim.shard_no)

    async def count(self, batch_id: str) -> int:
        result = await self.session.execute(
            select(func.count()).select_from(BatchShard).where(BatchShard.batch_id == batch_id)
        )
        return int(result.scalar_one())

    async def of_batch(self, batch_id: str) -> Sequence[BatchShard]:
        result = await self.session.execute(
            select(BatchShard).where(BatchShard.batch_id == batch_id).order_by(BatchShard.shard_no)
        )
        return result.scalars().all()


__all__ = ["ShardClaim", "ShardRepository", "ShardSpan"]
