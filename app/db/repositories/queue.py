"""Reads for scheduling across replicas: the batches waiting or running, which of them have a
shard free to claim, how many shards each project runs where (live leases only), and how fast a
model's last batches ran."""

from __future__ import annotations

from collections.abc import Sequence

from sqlalchemy import and_, func, or_, select
from sqlalchemy.ext.asyncio import AsyncSession

from app.core.statuses import BatchStatus, ShardStatus
from app.db.models import Batch, BatchShard
from app.scheduling.state import BatchProgress, Claimable, RunningShard

QUEUED_STATUSES = (BatchStatus.VALIDATING, BatchStatus.IN_PROGRESS)


class QueueRepository:
    def __init__(self, session: AsyncSession) -> None:
        self.session = session

    async def active(self, project: str | None = None) -> list[BatchProgress]:
        """Batches validating or in progress (of one project, or all), oldest first."""
        query = select(Batch).where(Batch.status.in_(QUEUED_STATUSES)).order_by(Batch.seq)
        if project is not None:
            query = query.where(Batch.project == project)
        rows = (await self.session.execute(query)).scalars().all()
        return [
            BatchProgress(
                b.id,
                b.project,
                b.model,
                str(b.status),
                b.completion_window,
                b.created_at,
                b.deadline,
                b.in_progress_at,
                b.total,
                b.completed + b.failed,
            )
            for b in rows
        ]

    async def finished_runs(self, model: str, last: int) -> list[tuple[int, float]]:
        """The `last` completed batches of `model`, latest first: (lines, seconds from
        in_progress to finalizing) of each."""
        query = (
            select(Batch.completed + Batch.failed, Batch.finalizing_at - Batch.in_progress_at)
            .where(
                Batch.status == BatchStatus.COMPLETED,
                Batch.model == model,
                Batch.in_progress_at.is_not(None),
                Batch.finalizing_at.is_not(None),
            )
            .order_by(Batch.finalizing_at.desc())
            .limit(last)
        )
        rows = await self.session.execute(query)
        return [(int(lines), float(seconds or 0)) for lines, seconds in rows]  # never null: filtered above

    async def claimable(self, now: float, skip_batches: Sequence[str]) -> list[Claimable]:
        """Running batches not paused nor past their hard expiry with a shard free to claim, each
        with the deadline that orders its work (`Batch.deadline`)."""
        deadline = Batch.deadline.label("deadline")
        free = or_(
            BatchShard.status == ShardStatus.PENDING,
            and_(BatchShard.status == ShardStatus.RUNNING, BatchShard.lease_expires_at < now),
        )
        query = (
            select(
                Batch.id,
                Batch.project,
                Batch.model,
                deadline,
                Batch.seq,
                func.max(BatchShard.started_at).is_not(None).label("resumed"),
            )
            .join(BatchShard, BatchShard.batch_id == Batch.id)
            .where(Batch.status == BatchStatus.IN_PROGRESS, Batch.paused_at.is_(None), Batch.expires_at > now, free)
            .group_by(Batch.id, Batch.project, Batch.model, Batch.expires_at, Batch.due_at, Batch.seq)
        )
        if skip_batches:
            query = query.where(Batch.id.not_in(list(skip_batches)))
        result = await self.session.execute(query)
        return [
            Claimable(row.id, row.project, row.model, int(row.deadline), row.seq, bool(row.resumed)) for row in result
        ]

    async def running_shards(self, now: float) -> list[RunningShard]:
        """How many shards of each batch run on each replica (live leases)."""
        result = await self.session.execute(
            select(Batch.project, Batch.model, BatchShard.lease_owner, func.count(), Batch.id)
            .join(Batch, Batch.id == BatchShard.batch_id)
            .where(BatchShard.status == ShardStatus.RUNNING, BatchShard.lease_expires_at >= now)
            .group_by(Batch.id, Batch.project, Batch.model, BatchShard.lease_owner)
        )
        return [
            RunningShard(project, model, owner or "", int(count), batch_id)
            for project, model, owner, count, batch_id in result
        ]


__all__ = ["QueueRepository"]
