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

    async def retention(self) -> list[tuple[str, int]]:
        """(name, retention days) of every project that has a retention period."""
        result = await self.session.execute(
            select(Project.name, Project.retention_days)
            .where(Project.retention_days.is_not(None))
            .order_by(Project.name)
        )
        return [(name, days) for name, days in result.all() if days is not None]

    async def is_archived(self, name: str) -> bool:
        result = await self.session.execute(select(Project.archived_at).where(Project.name == name))
        return result.scalar_one_or_none() is not None

    async def page(self, *, include_archived: bool, after: str | None, limit: int) -> tuple[Sequence[Project], bool]:
        """Projects by id (name); `after` is exclusive. Returns (rows, has_more)."""
        query = select(Project)
        if not include_archived:
            query = query.where(Project.archived_at.is_(None))
        if after is not None:
            query = query.where(Project.name > after)
        rows = (await self.session.execute(query.order_by(Project.name).limit(limit + 1))).scalars().all()
        return rows[:limit], len(rows) > limit

    async def save(self, project: Project) -> Project:
        """Insert or update by name (merge: one statement on both dialects for a single row)."""
        merged = await self.session.merge(project)
        await self.session.flush()
        return merged
