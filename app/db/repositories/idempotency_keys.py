"""SQL for the Idempotency-Key records (see app/http/idempotency_store.py). A record is named by
its project, the API key that made it and the key sent (`RecordId`); every write by a holder
checks its `owner` token, so a holder whose lease was taken over changes nothing."""

from __future__ import annotations

from dataclasses import dataclass
from typing import cast

from sqlalchemy import Table, delete, func, select, update
from sqlalchemy.dialects.postgresql import insert as pg_insert
from sqlalchemy.dialects.sqlite import insert as sqlite_insert
from sqlalchemy.ext.asyncio import AsyncSession
from sqlalchemy.sql.elements import ColumnElement

from app.db.base import dialect_of, rowcount
from app.db.models import IdempotencyKey


@dataclass(frozen=True)
class RecordId:
    project: str
    api_key_id: str
    key: str


def _is(record: RecordId) -> list[ColumnElement[bool]]:
    return [
        IdempotencyKey.project == record.project,
        IdempotencyKey.api_key_id == record.api_key_id,
        IdempotencyKey.key == record.key,
    ]


def _held_by(record: RecordId, owner: str) -> list[ColumnElement[bool]]:
    return [*_is(record), IdempotencyKey.owner == owner]


class IdempotencyKeyRepository:
    def __init__(self, session: AsyncSession) -> None:
        self.session = session

    async def get(self, record: RecordId) -> IdempotencyKey | None:
        return await self.session.get(
            IdempotencyKey, (record.project, record.api_key_id, record.key), populate_existing=True
        )

    async def insert_locked(
        self, record: RecordId, is_admin: bool, owner: str, now: float, locked_until: float
    ) -> bool:
        """A new record held by `owner`, unless the key has one (another request's): True if inserted."""
        insert_fn = pg_insert if dialect_of(self.session) == "postgresql" else sqlite_insert
        result = await self.session.execute(
            insert_fn(cast(Table, IdempotencyKey.__table__))
            .values(
                project=record.project,
                api_key_id=record.api_key_id,
                key=record.key,
                is_admin=is_admin,
                created_at=now,
                owner=owner,
                locked_until=locked_until,
            )
            .on_conflict_do_nothing(index_elements=["project", "api_key_id", "key"])
            .returning(IdempotencyKey.key)
        )
        return result.first() is not None

    async def take_over(self, record: RecordId, owner: str, now: float, locked_until: float) -> bool:
        """Hold a record whose holder stopped renewing it (its process died) before its route
        committed anything; True if taken."""
        result = await self.session.execute(
            update(IdempotencyKey)
            .where(
                *_is(record),
                IdempotencyKey.locked_until.is_not(None),
                IdempotencyKey.locked_until < now,
                IdempotencyKey.committed.is_(False),
            )
            .values(owner=owner, locked_until=locked_until, created_at=now)
        )
        return rowcount(result) == 1

    async def renew(self, record: RecordId, owner: str, locked_until: float) -> bool:
        """Extend the lease; False if `owner` no longer holds it."""
        result = await self.session.execute(
            update(IdempotencyKey)
            .where(*_held_by(record, owner), IdempotencyKey.locked_until.is_not(None))
            .values(locked_until=locked_until)
        )
        return rowcount(result) == 1

    async def mark_committed(self, record: RecordId, owner: str, committed: bool) -> bool:
        """In the route's own transaction: False if `owner` no longer holds the record (the
        transaction must then roll back)."""
        result = await self.session.execute(
            update(IdempotencyKey)
            .where(*_held_by(record, owner), IdempotencyKey.locked_until.is_not(None))
            .values(committed=committed)
        )
        return rowcount(result) == 1

    async def kept_bytes(self, project: str) -> int:
        """Bytes of response bodies the project's records keep."""
        result = await self.session.execute(
            select(func.coalesce(func.sum(IdempotencyKey.stored_bytes), 0)).where(IdempotencyKey.project == project)
        )
        return int(result.scalar_one())

    async def complete(
        self,
        record: RecordId,
        owner: str,
        fingerprint: str,
        status_code: int,
        content_type: str,
        body: bytes | None,
        retrieve_path: str | None,
    ) -> bool:
        result = await self.session.execute(
            update(IdempotencyKey)
            .where(*_held_by(record, owner))
            .values(
                locked_until=None,
                fingerprint=fingerprint,
                status_code=status_code,
                content_type=content_type,
                body=body,
                retrieve_path=retrieve_path,
                stored_bytes=len(body) if body is not None else 0,
            )
        )
        return rowcount(result) == 1

    async def release(self, record: RecordId, owner: str) -> None:
        """Forget a record whose request gave no response worth repeating (an error)."""
        await self.session.execute(delete(IdempotencyKey).where(*_held_by(record, owner)))

    async def remove_created_before(self, cutoff: float, record: RecordId | None = None) -> int:
        """Forget the records made before `cutoff` (of one key, when given); how many."""
        statement = delete(IdempotencyKey).where(IdempotencyKey.created_at < cutoff)
        if record is not None:
            statement = statement.where(*_is(record))
        result = await self.session.execute(statement)
        return rowcount(result)
