"""SQL for background responses: the one-line batches made through `POST /v1/responses`. They
run, and are deleted (tombstones), as any batch is (repositories/batches.py)."""

from __future__ import annotations

from sqlalchemy import Exists, Select, exists, func, select

from app.core.batch_kinds import BatchApi
from app.core.statuses import TERMINAL_BATCH_STATUSES
from app.db.models import Batch, BatchShard
from app.db.repositories.batches import BatchRepository


def line_started(batch_id: str) -> Exists:
    """A replica has claimed the one-line batch's line to run it (its shard has a fence)."""
    return exists().where(BatchShard.batch_id == batch_id, BatchShard.fence > 0)


class BackgroundResponseRepository(BatchRepository):
    def scoped(self, project: str | None) -> Select[Batch]:
        return self.not_deleted(project).where(Batch.api == BatchApi.RESPONSE)

    async def started(self, batch_id: str) -> bool:
        """Whether a replica has claimed the batch's line to run it (its shard has a fence)."""
        statement = select(line_started(batch_id))
        return bool((await self.session.execute(statement)).scalar())

    async def ended_before(self, cutoff: int, limit: int) -> list[tuple[str, str]]:
        """(project, id) of up to `limit` responses, not deleted, that ended before `cutoff`."""
        ended_at = func.coalesce(Batch.completed_at, Batch.failed_at, Batch.expired_at, Batch.cancelled_at)
        statement = (
            self.scoped(None)
            .where(Batch.status.in_(TERMINAL_BATCH_STATUSES), ended_at < cutoff)
            .order_by(Batch.seq)
            .limit(limit)
        )
        return [(batch.project, batch.id) for batch in (await self.session.execute(statement)).scalars()]
