"""SQL for per-project quotas: what a project currently holds."""

from __future__ import annotations

from sqlalchemy import func, or_, select
from sqlalchemy.ext.asyncio import AsyncSession

from app.core.statuses import ACTIVE_BATCH_STATUSES
from app.db.models import Batch, File, IdempotencyKey


class QuotaRepository:
    def __init__(self, session: AsyncSession) -> None:
        self.session = session

    async def stored_bytes(self, project: str, now: int) -> int:
        """Bytes of the project's live files (not deleted, not expired), outputs included, and of
        the responses its Idempotency-Key records keep (app/http/idempotency_store.py)."""
        files = (
            select(func.coalesce(func.sum(File.bytes), 0))
            .where(
                File.project == project,
                File.deleted_at.is_(None),
                or_(File.expires_at.is_(None), File.expires_at > now),
            )
            .scalar_subquery()
        )
        kept = (
            select(func.coalesce(func.sum(IdempotencyKey.stored_bytes), 0))
            .where(IdempotencyKey.project == project)
            .scalar_subquery()
        )
        return int((await self.session.execute(select(files + kept))).scalar_one())

    async def active_batches(self, project: str) -> int:
        result = await self.session.execute(
            select(func.count())
            .select_from(Batch)
            .where(Batch.project == project, Batch.status.in_(ACTIVE_BATCH_STATUSES))
        )
        return int(result.scalar_one())
