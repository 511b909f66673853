"""SQL for the Idempotency-Key records (see app/services/idempotency.py)."""

from __future__ import annotations

from typing import cast

from sqlalchemy import Table, delete, update
from sqlalchemy.dialects.postgresql import insert as pg_insert
from sqlalchemy.dialects.sqlite import insert as sqlite_insert
from sqlalchemy.ext.asyncio import AsyncSession

from app.db.base import dialect_of, rowcount
from app.db.models import IdempotencyKey


class IdempotencyKeyRepository:
    def __init__(self, session: AsyncSession) -> None:
        self.session = session

    async def get(self, project: str, key: str) -> IdempotencyKey | None:
        return await self.session.get(IdempotencyKey, (project, key), populate_existing=True)

    async def insert_locked(self, project: str, key: str, owner: str, now: float, locked_until: float) -> bool:
        """A new record held by `owner`, unless the key has one (another request's): True if inserted."""
        insert_fn = pg_insert if dialect_of(self.session) == "postgresql" else sqlite_insert
        result = await self.session.execute(
            insert_fn(cast(Table, IdempotencyKey.__table__))
            .values(project=project, key=key, created_at=now, owner=owner, locked_until=locked_until)
            .on_conflict_do_nothing(index_elements=["project", "key"])
            .returning(IdempotencyKey.key)
        )
        return result.first() is not None

    async def take_over(self, project: str, key: str, owner: str, now: float, locked_until: float) -> bool:
        """Hold a record whose holder stopped renewing it (its process died); True if taken."""
        result = await self.session.execute(
            update(IdempotencyKey)
            .where(
                IdempotencyKey.project == project,
                IdempotencyKey.key == key,
                IdempotencyKey.locked_until.is_not(None),
                IdempotencyKey.locked_until < now,
            )
            .values(owner=owner, locked_until=locked_until, created_at=now)
        )
        return rowcount(result) == 1

    async def renew(self, project: str, key: str, owner: str, locked_until: float) -> None:
        await self.session.execute(
            update(IdempotencyKey)
            .where(IdempotencyKey.project == project, IdempotencyKey.key == key, IdempotencyKey.owner == owner)
            .values(locked_until=locked_until)
        )

    async def complete(
        self, project: str, key: str, owner: str, fingerprint: str, status_code: int, content_type: str, body: bytes
    ) -> None:
        await self.session.execute(
            update(IdempotencyKey)
            .where(IdempotencyKey.project == project, IdempotencyKey.key == key, IdempotencyKey.owner == owner)
            .values(
                locked_until=None,
                fingerprint=fingerprint,
                status_code=status_code,
                content_type=content_type,
                body=body,
            )
        )

    async def release(self, project: str, key: str, owner: str) -> None:
        """Forget a record whose request gave no response worth repeating (an error)."""
        await self.session.execute(
            delete(IdempotencyKey).where(
                IdempotencyKey.project == project, IdempotencyKey.key == key, IdempotencyKey.owner == owner
            )
        )

    async def remove_created_before(self, cutoff: float, project: str | None = None, key: str | None = None) -> int:
        """Forget the records made before `cutoff` (of one key, when given); how many."""
        statement = delete(IdempotencyKey).where(IdempotencyKey.created_at < cutoff)
        if project is not None and key is not None:
            statement = statement.where(IdempotencyKey.project == project, IdempotencyKey.key == key)
        result = await self.session.execute(statement)
        return rowcount(result)
