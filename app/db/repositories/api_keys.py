"""SQL for stored API keys."""

from __future__ import annotations

from sqlalchemy import func, select
from sqlalchemy.ext.asyncio import AsyncSession

from app.db.models import ApiKey


class ApiKeyRepository:
    def __init__(self, session: AsyncSession) -> None:
        self.session = session

    async def add(self, key: ApiKey) -> ApiKey:
        self.session.add(key)
        await self.session.flush()
        return key

    async def project_for_hash(self, key_hash: str) -> str | None:
        result = await self.session.execute(
            select(ApiKey.project).where(ApiKey.key_hash == key_hash, ApiKey.revoked_at.is_(None))
        )
        return result.scalar_one_or_none()

    async def count_active(self) -> int:
        result = await self.session.execute(
            select(func.count()).select_from(ApiKey).where(ApiKey.revoked_at.is_(None))
        )
        return int(result.scalar_one())
