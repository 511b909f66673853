"""SQL for the single requests list: the project's background responses (not deleted) and flex
requests. An answered flex request is a tombstone at once (its caller has the answer), so flex
rows are listed deleted or not: they show until the tombstone purge forgets them."""

from __future__ import annotations

from collections.abc import Sequence

from sqlalchemy import Select, and_, or_, select

from app.core.batch_kinds import BatchApi
from app.db.models import Batch, BatchShard
from app.db.repositories.base import ProjectScopedRepository


class SingleRequestRepository(ProjectScopedRepository[Batch]):
    model = Batch

    def scoped(self, project: str | None) -> Select[Batch]:
        shown = or_(Batch.api == BatchApi.FLEX, and_(Batch.api == BatchApi.RESPONSE, Batch.deleted_at.is_(None)))
        return super().scoped(project).where(shown)

    async def started(self, batch_ids: Sequence[str]) -> set[str]:
        """Which of the batches a replica has claimed the line of (its shard has a fence)."""
        if not batch_ids:
            return set()
        statement = select(BatchShard.batch_id).where(BatchShard.batch_id.in_(batch_ids), BatchShard.fence > 0)
        return set((await self.session.execute(statement.distinct())).scalars())
