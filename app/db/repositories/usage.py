"""SQL for usage accounting: per-minute aggregates added in the checkpoint's transaction, and
the bucketed sums the Usage API reads."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, replace
from typing import Any, cast

from sqlalchemy import Table, bindparam, func, select
from sqlalchemy.dialects.postgresql import insert as pg_insert
from sqlalchemy.dialects.sqlite import insert as sqlite_insert
from sqlalchemy.ext.asyncio import AsyncSession
from sqlalchemy.sql.dml import Insert

from app.db.base import dialect_of
from app.db.models import UsageMinute
from app.db.repositories.batches import LineRow

# The columns a usage query may group by, by the Usage API's group_by names (`batch`: every line
# batchd runs is batch work, so its groups are the batches themselves).
GROUP_COLUMNS = {
    "project_id": UsageMinute.project,
    "api_key_id": UsageMinute.api_key_id,
    "model": UsageMinute.model,
    "batch": UsageMinute.batch_id,
}


@dataclass(frozen=True)
class UsageKey:
    """Whose lines a checkpoint records: the batch's project, model (of lines that name none),
    usage kind and the key that created the batch."""

    project: str
    model: str
    batch_id: str
    kind: str
    api_key_id: str | None = None


@dataclass(frozen=True)
class UsageQuery:
    kinds: Sequence[str]
    start: int  # inclusive, Unix seconds
    end: int  # exclusive
    bucket_seconds: int
    group_by: Sequence[str] = ()
    projects: Sequence[str] = ()
    models: Sequence[str] = ()
    api_keys: Sequence[str] = ()


_SUMS = ("input_tokens", "cached_tokens", "output_tokens", "requests", "seconds")
_KEYS = ("project", "model", "batch_id", "minute", "kind", "api_key_id")
_upserts: dict[str, Insert] = {}


def _upsert(dialect: str) -> Insert:
    """The minute's upsert for `dialect`, built once (a checkpoint write runs it every time)."""
    statement = _upserts.get(dialect)
    if statement is None:
        insert_fn = pg_insert if dialect == "postgresql" else sqlite_insert
        table = cast(Table, UsageMinute.__table__)
        inserting = insert_fn(table).values({name: bindparam(f"b_{name}") for name in (*_KEYS, *_SUMS)})
        statement = _upserts[dialect] = inserting.on_conflict_do_update(
            index_elements=["project", "model", "batch_id", "minute"],
            set_={name: table.c[name] + inserting.excluded[name] for name in _SUMS},
        )
    return statement


class UsageRepository:
    def __init__(self, session: AsyncSession) -> None:
        self.session = session

    async def add(self, key: UsageKey, minute: int, rows: Sequence[LineRow]) -> None:
        """Add the successful lines among `rows` (those in the output file) to `key`'s minute,
        each under its own model where it names one (a Message Batch's lines may name several)."""
        by_model: dict[str, list[LineRow]] = {}
        for row in rows:
            if row.ok:
                by_model.setdefault(row.model or key.model, []).append(row)
        for model in sorted(by_model):  # one order on every replica: upserts never deadlock
            await self._add(replace(key, model=model), minute, by_model[model])

    async def _add(self, key: UsageKey, minute: int, ok: Sequence[LineRow]) -> None:
        values = {
            "b_project": key.project,
            "b_model": key.model,
            "b_batch_id": key.batch_id,
            "b_minute": minute,
            "b_kind": key.kind,
            "b_api_key_id": key.api_key_id,
            "b_input_tokens": sum(r.input_tokens for r in ok),
            "b_cached_tokens": sum(r.cached_tokens for r in ok),
            "b_output_tokens": sum(r.output_tokens for r in ok),
            "b_requests": len(ok),
            "b_seconds": sum(r.seconds for r in ok),
        }
        await self.session.execute(_upsert(dialect_of(self.session)), values)

    async def sums(self, query: UsageQuery) -> list[dict[str, Any]]:
        """One row per (bucket start, grouped columns...) with the summed counts, for minutes in
        [start, end); buckets are aligned to multiples of their width since the epoch (UTC)."""
        width = query.bucket_seconds
        bucket = ((UsageMinute.minute // width) * width).label("bucket")
        groups = [GROUP_COLUMNS[name].label(name) for name in query.group_by]
        statement = (
            select(
                bucket,
                *groups,
                func.sum(UsageMinute.input_tokens).label("input_tokens"),
                func.sum(UsageMinute.cached_tokens).label("cached_tokens"),
                func.sum(UsageMinute.output_tokens).label("output_tokens"),
                func.sum(UsageMinute.requests).label("requests"),
                func.sum(UsageMinute.seconds).label("seconds"),
            )
            .where(
                UsageMinute.kind.in_(list(query.kinds)),
                UsageMinute.minute >= query.start,
                UsageMinute.minute < query.end,
            )
            .group_by(bucket, *groups)
            .order_by(bucket, *groups)
        )
        if query.projects:
            statement = statement.where(UsageMinute.project.in_(list(query.projects)))
        if query.models:
            statement = statement.where(UsageMinute.model.in_(list(query.models)))
        if query.api_keys:
            statement = statement.where(UsageMinute.api_key_id.in_(list(query.api_keys)))
        result = await self.session.execute(statement)
        return [dict(row._mapping) for row in result.all()]
