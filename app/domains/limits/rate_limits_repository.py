"""SQL for projects' daily rate limits and what a project used of them today."""

from __future__ import annotations

from collections.abc import Sequence

from sqlalchemy import func, select
from sqlalchemy.ext.asyncio import AsyncSession

from app.core.statuses import BatchStatus
from app.db.models import Batch, BatchPromptTokens, ProjectRateLimit


class RateLimitRepository:
    def __init__(self, session: AsyncSession) -> None:
        self.session = session

    async def get(self, project: str, model: str) -> ProjectRateLimit | None:
        return await self.session.get(ProjectRateLimit, (project, model))

    async def of_project(self, project: str) -> Sequence[ProjectRateLimit]:
        result = await self.session.execute(
            select(ProjectRateLimit).where(ProjectRateLimit.project == project).order_by(ProjectRateLimit.model)
        )
        return result.scalars().all()

    async def save(self, row: ProjectRateLimit) -> ProjectRateLimit:
        merged = await self.session.merge(row)
        await self.session.flush()
        return merged

    async def tokens_since(self, project: str, model: str, since: int, other_than: str) -> int:
        """Prompt tokens of the project's batches created since `since` for `model`, whatever
        became of them (but one that failed validation, which records none)."""
        result = await self.session.execute(
            select(func.coalesce(func.sum(BatchPromptTokens.tokens), 0))
            .join(Batch, Batch.id == BatchPromptTokens.batch_id)
            .where(
                Batch.project == project,
                Batch.created_at >= since,
                Batch.id != other_than,
                BatchPromptTokens.model == model,
            )
        )
        return int(result.scalar_one())

    async def requests_since(self, project: str, model: str, since: int, other_than: str) -> int:
        """Lines of the project's batches of `model` created since `since` that passed validation."""
        result = await self.session.execute(
            select(func.coalesce(func.sum(Batch.total), 0)).where(
                Batch.project == project,
                Batch.model == model,
                Batch.created_at >= since,
                Batch.id != other_than,
                Batch.status != BatchStatus.FAILED,
            )
        )
        return int(result.scalar_one())
