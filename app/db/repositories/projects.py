"""SQL for operators' project settings."""

from __future__ import annotations

from collections.abc import Sequence

from sqlalchemy import select
from sqlalchemy.ext.asyncio import AsyncSession

from app.db.models import Project


class ProjectRepository:
    def __init__(self, session: AsyncSession) -> None:
        self.session = session

    async def get(self, name: str) -> Project | None:
        return await self.session.get(Project, name)

    async def list_all(self) -> Sequence[Project]:
        result = await self.session.execute(select(Project).order_by(Project.name))
        return result.scalars().all()

    async def save(self, project: Project) -> Project:
        """Insert or update by name (merge: one statement on both dialects for a single row)."""
        merged = await self.session.merge(project)
        await self.session.flush()
        return merged
