"""SQL for batches.

API reads are scoped to a project. A batch is claimed whole only for the steps one replica
must take alone (validate, finalize, cancel, expire); its lines run as shards
(repositories/shards.py). Those writes are fenced: each is conditioned on the `fence` the
replica got when it claimed the batch, so one whose lease was taken over writes nothing
(LeaseLost)."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from sqlalchemy import and_, exists, func, or_, select, update

from app.core.statuses import ACTIVE_BATCH_STATUSES, CANCELLABLE_BATCH_STATUSES, BatchStatus, ShardStatus
from app.db.base import rowcount
from app.db.models import Batch, BatchShard
from app.db.repositories.base import ProjectScopedRepository


class LeaseLost(Exception):
    """Another worker now owns the batch; this one must stop writing."""


@dataclass
class Claim:
    batch_id: str
    fence: int
    # The lease was taken from another worker that let it expire.
    taken_over: bool = False


@dataclass
class LineRow:
    line_no: int
    ok: bool
    line: str
    input_tokens: int = 0
    cached_tokens: int = 0
    output_tokens: int = 0
    reasoning_tokens: int = 0


class BatchRepository(ProjectScopedRepository[Batch]):
    model = Batch

    # -- API side (project-scoped) ------------------------------------------------------------

    async def request_cancel(self, project: str, batch_id: str, now: int) -> bool:
        result = await self.session.execute(
            update(Batch)
            .where(Batch.project == project, Batch.id == batch_id, Batch.status.in_(CANCELLABLE_BATCH_STATUSES))
            .values(status=BatchStatus.CANCELLING, cancelling_at=now)
        )
        return rowcount(result) == 1

    async def active_batch_using_file(self, project: str, file_id: str) -> str | None:
        result = await self.session.execute(
            select(Batch.id)
            .where(Batch.project == project, Batch.input_file_id == file_id, Batch.status.in_(ACTIVE_BATCH_STATUSES))
            .limit(1)
        )
        return result.scalar_one_or_none()

    # -- worker side --------------------------------------------------------------------------

    async def claim(self, owner: str, now: float, lease_seconds: float, skip: Sequence[str]) -> Claim | None:
        """Atomically take the oldest batch that has a one-replica step to take and whose lease
        is free or expired: validating or finalizing; cancelling, or in_progress past its
        expiry, once no replica holds a live lease on one of its shards; in_progress with every
        shard done (the replica that finished the last shard normally moves it on itself)."""
        live_shard = exists().where(
            BatchShard.batch_id == Batch.id,
            BatchShard.status == ShardStatus.RUNNING,
            BatchShard.lease_expires_at >= now,
        )
        unfinished_shard = exists().where(BatchShard.batch_id == Batch.id, BatchShard.status != ShardStatus.DONE)
        has_work = or_(
            Batch.status.in_((BatchStatus.VALIDATING, BatchStatus.FINALIZING)),
            and_(Batch.status == BatchStatus.CANCELLING, ~live_shard),
            and_(
                Batch.status == BatchStatus.IN_PROGRESS,
                or_(~unfinished_shard, and_(Batch.expires_at <= now, ~live_shard)),
            ),
        )
        candidate = (
            select(Batch.seq, Batch.lease_owner)
            .where(has_work, (Batch.lease_expires_at.is_(None)) | (Batch.lease_expires_at < now))
            .order_by(Batch.seq)
            .limit(1)
            .with_for_update(skip_locked=True, of=Batch)
        )
        if skip:
            candidate = candidate.where(Batch.id.not_in(list(skip)))
        # Picked first and then updated (the FOR UPDATE keeps the row ours on Postgres; SQLite's
        # write transaction is exclusive), so who held it before is known: a claim of a lease
        # someone else let expire is a takeover.
        picked = (await self.session.execute(candidate)).first()
        if picked is None:
            return None
        seq, previous = picked
        result = await self.session.execute(
            update(Batch)
            .where(Batch.seq == seq)
            .values(lease_owner=owner, lease_expires_at=now + lease_seconds, fence=Batch.fence + 1)
            .returning(Batch.id, Batch.fence)
        )
        batch_id, fence = result.one()
        return Claim(batch_id, fence, taken_over=previous not in (None, owner))

    async def _fenced_update(self, claim: Claim, *conditions, **values) -> bool:
        result = await self.session.execute(
            update(Batch).where(Batch.id == claim.batch_id, Batch.fence == claim.fence, *conditions).values(**values)
        )
        return rowcount(result) == 1

    async def heartbeat(self, claim: Claim, now: float, lease_seconds: float) -> None:
        if not await self._fenced_update(claim, lease_expires_at=now + lease_seconds):
            raise LeaseLost(claim.batch_id)

    async def release(self, claim: Claim) -> None:
        await self._fenced_update(claim, lease_owner=None, lease_expires_at=None)

    async def enqueued_prompt_tokens(self, project: str, model: str, other_than: str) -> int:
        """Prompt tokens counted for `project`'s unfinished batches of `model`, but `other_than`."""
        result = await self.session.execute(
            select(func.coalesce(func.sum(Batch.prompt_tokens), 0)).where(
                Batch.project == project,
                Batch.model == model,
                Batch.status.in_((BatchStatus.VALIDATING, BatchStatus.IN_PROGRESS, BatchStatus.FINALIZING)),
                Batch.id != other_than,
            )
        )
        return int(result.scalar_one() or 0)

    async def load(self, batch_id: str) -> Batch | None:
        result = await self.session.execute(select(Batch).where(Batch.id == batch_id))
        return result.scalar_one_or_none()

    async def status(self, batch_id: str) -> BatchStatus | None:
        result = await self.session.execute(select(Batch.status).where(Batch.id == batch_id))
        return result.scalar_one_or_none()

    async def transition(self, claim: Claim, from_statuses: Sequence[BatchStatus], **values) -> bool:
        """Guarded status change; False if the status moved on (e.g. a cancel arrived)."""
        return await self._fenced_update(claim, Batch.status.in_(list(from_statuses)), **values)

    async def finish_running(self, batch_id: str, now: int) -> bool:
        """in_progress -> finalizing once every shard is done; True for the one caller that moved it."""
        unfinished_shard = exists().where(BatchShard.batch_id == Batch.id, BatchShard.status != ShardStatus.DONE)
        result = await self.session.execute(
            update(Batch)
            .where(Batch.id == batch_id, Batch.status == BatchStatus.IN_PROGRESS, ~unfinished_shard)
            .values(status=BatchStatus.FINALIZING, finalizing_at=now)
        )
        return rowcount(result) == 1


__all__ = ["BatchRepository", "Claim", "LeaseLost", "LineRow"]
