"""SQL for batches and their per-line checkpoint rows.

API reads are scoped to a project. Worker writes are fenced: each is conditioned on the
`fence` the worker got when it claimed the batch, so a worker whose lease was taken over
writes nothing (LeaseLost)."""

from __future__ import annotations

from collections.abc import AsyncIterator, Sequence
from dataclasses import dataclass

from sqlalchemy import Select, func, select, update
from sqlalchemy.dialects.postgresql import insert as pg_insert
from sqlalchemy.dialects.sqlite import insert as sqlite_insert
from sqlalchemy.ext.asyncio import AsyncSession

from app.db.models import ACTIVE_STATUSES, Batch, BatchLine

CANCELLABLE_STATUSES = ("validating", "in_progress", "finalizing")


class LeaseLost(Exception):
    """Another worker now owns the batch; this one must stop writing."""


@dataclass
class Claim:
    batch_id: str
    fence: int


@dataclass
class LineRow:
    line_no: int
    ok: bool
    line: str
    input_tokens: int = 0
    cached_tokens: int = 0
    output_tokens: int = 0
    reasoning_tokens: int = 0


class BatchRepository:
    def __init__(self, session: AsyncSession) -> None:
        self.session = session

    # -- API side (project-scoped) ------------------------------------------------------------

    def _scoped(self, project: str) -> Select[tuple[Batch]]:
        return select(Batch).where(Batch.project == project)

    async def add(self, batch: Batch) -> Batch:
        self.session.add(batch)
        await self.session.flush()
        return batch

    async def get(self, project: str, batch_id: str) -> Batch | None:
        result = await self.session.execute(self._scoped(project).where(Batch.id == batch_id))
        return result.scalar_one_or_none()

    async def cursor_seq(self, project: str, batch_id: str) -> int | None:
        result = await self.session.execute(
            select(Batch.seq).where(Batch.project == project, Batch.id == batch_id)
        )
        return result.scalar_one_or_none()

    async def list_newest_first(self, project: str, after_seq: int | None, limit: int) -> Sequence[Batch]:
        statement = self._scoped(project)
        if after_seq is not None:
            statement = statement.where(Batch.seq < after_seq)
        result = await self.session.execute(statement.order_by(Batch.seq.desc()).limit(limit))
        return result.scalars().all()

    async def request_cancel(self, project: str, batch_id: str, now: int) -> bool:
        result = await self.session.execute(
            update(Batch)
            .where(Batch.project == project, Batch.id == batch_id, Batch.status.in_(CANCELLABLE_STATUSES))
            .values(status="cancelling", cancelling_at=now)
        )
        return result.rowcount == 1

    async def active_batch_using_file(self, project: str, file_id: str) -> str | None:
        result = await self.session.execute(
            select(Batch.id)
            .where(Batch.project == project, Batch.input_file_id == file_id, Batch.status.in_(ACTIVE_STATUSES))
            .limit(1)
        )
        return result.scalar_one_or_none()

    # -- worker side --------------------------------------------------------------------------

    async def claim(self, owner: str, now: float, lease_seconds: float, skip: Sequence[str]) -> Claim | None:
        """Atomically take the oldest active batch whose lease is free or expired."""
        candidate = (
            select(Batch.seq)
            .where(
                Batch.status.in_(ACTIVE_STATUSES),
                (Batch.lease_expires_at.is_(None)) | (Batch.lease_expires_at < now),
            )
            .order_by(Batch.seq)
            .limit(1)
            .with_for_update(skip_locked=True)
        )
        if skip:
            candidate = candidate.where(Batch.id.not_in(list(skip)))
        result = await self.session.execute(
            update(Batch)
            .where(Batch.seq == candidate.scalar_subquery())
            .values(lease_owner=owner, lease_expires_at=now + lease_seconds, fence=Batch.fence + 1)
            .returning(Batch.id, Batch.fence)
        )
        row = result.first()
        return Claim(row[0], row[1]) if row else None

    async def _fenced_update(self, claim: Claim, *conditions, **values) -> bool:
        result = await self.session.execute(
            update(Batch).where(Batch.id == claim.batch_id, Batch.fence == claim.fence, *conditions).values(**values)
        )
        return result.rowcount == 1

    async def heartbeat(self, claim: Claim, now: float, lease_seconds: float) -> None:
        if not await self._fenced_update(claim, lease_expires_at=now + lease_seconds):
            raise LeaseLost(claim.batch_id)

    async def release(self, claim: Claim) -> None:
        await self._fenced_update(claim, lease_owner=None, lease_expires_at=None)

    async def load(self, batch_id: str) -> Batch | None:
        result = await self.session.execute(select(Batch).where(Batch.id == batch_id))
        return result.scalar_one_or_none()

    async def status(self, batch_id: str) -> str | None:
        result = await self.session.execute(select(Batch.status).where(Batch.id == batch_id))
        return result.scalar_one_or_none()

    async def transition(self, claim: Claim, from_statuses: Sequence[str], **values) -> bool:
        """Guarded status change; False if the status moved on (e.g. a cancel arrived)."""
        return await self._fenced_update(claim, Batch.status.in_(list(from_statuses)), **values)

    async def record_lines(self, claim: Claim, rows: Sequence[LineRow]) -> int:
        """Insert finished lines (a line already stored is left alone) and add what was new to the
        live counters, in one transaction. Returns how many rows were new."""
        if not rows:
            return 0
        dialect = self.session.bind.dialect.name
        insert_fn = pg_insert if dialect == "postgresql" else sqlite_insert
        by_line = {row.line_no: row for row in rows}
        result = await self.session.execute(
            insert_fn(BatchLine.__table__)
            .on_conflict_do_nothing(index_elements=["batch_id", "line_no"])
            .returning(BatchLine.line_no),
            [{"batch_id": claim.batch_id, "line_no": r.line_no, "ok": r.ok, "line": r.line} for r in rows],
        )
        new = [by_line[line_no] for (line_no,) in result.all()]
        counted = await self._fenced_update(
            claim,
            completed=Batch.completed + sum(1 for r in new if r.ok),
            failed=Batch.failed + sum(1 for r in new if not r.ok),
            input_tokens=Batch.input_tokens + sum(r.input_tokens for r in new),
            cached_tokens=Batch.cached_tokens + sum(r.cached_tokens for r in new),
            output_tokens=Batch.output_tokens + sum(r.output_tokens for r in new),
            reasoning_tokens=Batch.reasoning_tokens + sum(r.reasoning_tokens for r in new),
        )
        if not counted:
            raise LeaseLost(claim.batch_id)
        return len(new)

    async def finished_line_numbers(self, batch_id: str) -> set[int]:
        result = await self.session.execute(select(BatchLine.line_no).where(BatchLine.batch_id == batch_id))
        return set(result.scalars().all())

    async def count_lines(self, batch_id: str) -> int:
        result = await self.session.execute(
            select(func.count()).select_from(BatchLine).where(BatchLine.batch_id == batch_id)
        )
        return int(result.scalar_one())

    async def stream_lines(self, batch_id: str) -> AsyncIterator[BatchLine]:
        """Finished lines in input order, fetched in pages (never all in memory)."""
        result = await self.session.stream(
            select(BatchLine).where(BatchLine.batch_id == batch_id).order_by(BatchLine.line_no)
            .execution_options(yield_per=500)
        )
        async for line in result.scalars():
            yield line


__all__ = ["BatchRepository", "Claim", "LeaseLost", "LineRow"]
