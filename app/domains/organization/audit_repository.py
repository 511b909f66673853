"""SQL for the audit log."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from sqlalchemy import select
from sqlalchemy.ext.asyncio import AsyncSession

from app.db.models import AuditLog


@dataclass(frozen=True)
class AuditFilter:
    """What `GET /organization/audit_logs` narrows to; empty lists and None mean no filter."""

    event_types: Sequence[str] = ()
    project_ids: Sequence[str] = ()
    actor_ids: Sequence[str] = ()
    resource_ids: Sequence[str] = ()
    gt: int | None = None
    gte: int | None = None
    lt: int | None = None
    lte: int | None = None


class AuditLogRepository:
    def __init__(self, session: AsyncSession) -> None:
        self.session = session

    async def add(self, entry: AuditLog) -> None:
        self.session.add(entry)
        await self.session.flush()

    async def page(
        self, where: AuditFilter, *, after: int | None, before: int | None, limit: int
    ) -> tuple[Sequence[AuditLog], bool]:
        """Newest first; `after` (exclusive) pages to older entries, `before` to newer ones."""
        query = select(AuditLog)
        if where.event_types:
            query = query.where(AuditLog.type.in_(where.event_types))
        if where.project_ids:
            query = query.where(AuditLog.project_id.in_(where.project_ids))
        if where.actor_ids:
            query = query.where(AuditLog.actor_key_id.in_(where.actor_ids))
        if where.resource_ids:
            query = query.where(AuditLog.resource_id.in_(where.resource_ids))
        for bound, compare in (
            (where.gt, AuditLog.effective_at.__gt__),
            (where.gte, AuditLog.effective_at.__ge__),
            (where.lt, AuditLog.effective_at.__lt__),
            (where.lte, AuditLog.effective_at.__le__),
        ):
            if bound is not None:
                query = query.where(compare(bound))
        if before is not None:
            # The page just newer than `before`, still returned newest first.
            query = query.where(AuditLog.seq > before).order_by(AuditLog.seq).limit(limit + 1)
            rows = list((await self.session.execute(query)).scalars().all())
            return rows[:limit][::-1], len(rows) > limit
        if after is not None:
            query = query.where(AuditLog.seq < after)
        rows = list((await self.session.execute(query.order_by(AuditLog.seq.desc()).limit(limit + 1))).scalars().all())
        return rows[:limit], len(rows) > limit
