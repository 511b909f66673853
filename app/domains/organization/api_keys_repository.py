"""SQL for stored API keys."""

from __future__ import annotations

from collections.abc import Sequence

from sqlalchemy import Row, exists, func, or_, select, update
from sqlalchemy.ext.asyncio import AsyncSession

from app.db.base import rowcount
from app.db.models import ApiKey, Project


class ApiKeyRepository:
    def __init__(self, session: AsyncSession) -> None:
        self.session = session

    async def add(self, key: ApiKey) -> ApiKey:
        self.session.add(key)
        await self.session.flush()
        return key

    async def owner_of_hash(self, key_hash: str) -> Row[int, str, bool] | None:
        """The live key's (id, project, is_admin), or None; a project key of an archived project
        is not live (admin keys do not belong to a project in that sense)."""
        archived = exists().where(Project.name == ApiKey.project, Project.archived_at.is_not(None))
        result = await self.session.execute(
            select(ApiKey.id, ApiKey.project, ApiKey.is_admin).where(
                ApiKey.key_hash == key_hash, ApiKey.revoked_at.is_(None), or_(ApiKey.is_admin, ~archived)
            )
        )
        return result.first()

    async def get(self, key_id: int) -> ApiKey | None:
        return await self.session.get(ApiKey, key_id)

    async def page(
        self, *, admin: bool, project: str | None, after: int | None, limit: int, newest_first: bool = False
    ) -> tuple[Sequence[ApiKey], bool]:
        """Live keys, admin keys or one project's, by id; `after` is exclusive. Returns (rows, has_more)."""
        query = select(ApiKey).where(ApiKey.is_admin == admin, ApiKey.revoked_at.is_(None))
        if project is not None:
            query = query.where(ApiKey.project == project)
        if after is not None:
            query = query.where(ApiKey.id < after if newest_first else ApiKey.id > after)
        query = query.order_by(ApiKey.id.desc() if newest_first else ApiKey.id).limit(limit + 1)
        rows = (await self.session.execute(query)).scalars().all()
        return rows[:limit], len(rows) > limit

    async def count_all(self) -> int:
        """Keys ever created, revoked ones included."""
        result = await self.session.execute(select(func.count()).select_from(ApiKey))
        return int(result.scalar_one())

    async def list_all(self) -> Sequence[ApiKey]:
        result = await self.session.execute(select(ApiKey).order_by(ApiKey.id))
        return result.scalars().all()

    async def revoke(self, key_id: int, now: int) -> bool:
        """Mark the key revoked; False when no such key exists. Revoking twice keeps the first time."""
        result = await self.session.execute(
            update(ApiKey).where(ApiKey.id == key_id, ApiKey.revoked_at.is_(None)).values(revoked_at=now)
        )
        if rowcount(result):
            return True
        exists = await self.session.execute(select(ApiKey.id).where(ApiKey.id == key_id))
        return exists.scalar_one_or_none() is not None
