"""Aggregate reads for monitoring (the `/metrics` scrape)."""

from __future__ import annotations

from sqlalchemy import func, select
from sqlalchemy.ext.asyncio import AsyncSession

from app.core.statuses import BatchStatus
from app.db.models import Batch


class StatsRepository:
    def __init__(self, session: AsyncSession) -> None:
        self.session = session

    async def batches_by_status(self) -> dict[BatchStatus, int]:
        """{status: number of batches}, over every project, deleted ones left out (served by ix_batches_status)."""
        result = await self.session.execute(
            select(Batch.status, func.count()).where(Batch.deleted_at.is_(None)).group_by(Batch.status)
        )
        return {status: int(count) for status, count in result.all()}
