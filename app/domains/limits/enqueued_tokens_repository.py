"""SQL for the enqueued-token limit: a batch's prompt tokens per model, what a project has
enqueued per model, and the per-project lock that makes check-and-record one step."""

from __future__ import annotations

import hashlib
from collections.abc import Iterable, Mapping

from sqlalchemy import delete, func, select, text
from sqlalchemy.ext.asyncio import AsyncSession

from app.core.statuses import BatchStatus
from app.db.base import dialect_of
from app.db.models import Batch, BatchPromptTokens

# A batch's tokens count against the limit from validation until it ends.
ENQUEUED_STATUSES = (BatchStatus.VALIDATING, BatchStatus.IN_PROGRESS, BatchStatus.FINALIZING)


def _lock_key(project: str) -> int:
    """A stable signed 64-bit key for Postgres' advisory locks (Python's hash() is salted per process)."""
    digest = hashlib.sha256(b"batchd.enqueued-tokens:" + project.encode()).digest()
    return int.from_bytes(digest[:8], "big", signed=True)


class EnqueuedTokenRepository:
    def __init__(self, session: AsyncSession) -> None:
        self.session = session

    async def lock_project(self, project: str) -> None:
        """Hold the project's enqueued-token lock until the transaction ends, so a check and the
        count it admits are one step across sessions and replicas. Postgres: an advisory
        transaction lock (a project needs no row for it). SQLite: every write transaction
        already holds the database's single write lock (BEGIN IMMEDIATE, app/db/engine.py)."""
        if dialect_of(self.session) == "postgresql":
            await self.session.execute(text("SELECT pg_advisory_xact_lock(:key)"), {"key": _lock_key(project)})

    async def enqueued(self, project: str, models: Iterable[str], other_than: str) -> dict[str, int]:
        """Prompt tokens of `project`'s unfinished batches (but `other_than`) for each of `models`."""
        wanted = list(models)
        result = await self.session.execute(
            select(BatchPromptTokens.model, func.sum(BatchPromptTokens.tokens))
            .join(Batch, Batch.id == BatchPromptTokens.batch_id)
            .where(
                Batch.project == project,
                Batch.status.in_(ENQUEUED_STATUSES),
                Batch.id != other_than,
                BatchPromptTokens.model.in_(wanted),
            )
            .group_by(BatchPromptTokens.model)
        )
        counted = {model: int(tokens or 0) for model, tokens in result.all()}
        return {model: counted.get(model, 0) for model in wanted}

    async def record(self, batch_id: str, tokens_by_model: Mapping[str, int]) -> None:
        """The batch's counts, in place of any it had: a replica that took a batch over may
        validate it again after the first one's counts were committed."""
        await self.session.execute(delete(BatchPromptTokens).where(BatchPromptTokens.batch_id == batch_id))
        self.session.add_all(
            BatchPromptTokens(batch_id=batch_id, model=model, tokens=tokens)
            for model, tokens in tokens_by_model.items()
        )
        await self.session.flush()
