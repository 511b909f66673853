"""SQL for stored API keys."""

from __future__ import annotations

from collections.abc import Sequence

from sqlalchemy import func, select, update
from sqlalchemy.ext.asyncio import AsyncSession

from app.db.base import rowcount
from app.db.models import ApiKey


class ApiKeyRepository:
    def __init__(self, session: AsyncSession) -> None:
        self.session = session

    async def add(self, key: ApiKey) -> ApiKey:
        self.session.add(key)
        await self.session.flush()
        return key

    async def owner_of_hash(self, key_hash: str) -> tuple[str, bool] | None:
        """The live key's (project, is_admin), or None."""
        result = await self.session.execute(
            select(ApiKey.project, ApiKey.is_admin).where(ApiKey.key_hash == key_hash, ApiKey.revoked_at.is_(None))
        )
        row = result.first()
        return None if row is None else (row.project, bool(row.is_admin))

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
