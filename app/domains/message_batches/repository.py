"""SQL for Message Batches: the batches made through Anthropic's API, listed both ways from a
cursor (`after_id`: older, `before_id`: newer). They run, and are deleted (tombstones), as any
batch is (repositories/batches.py)."""

from __future__ import annotations

from sqlalchemy import Select

from app.core.batch_kinds import BatchApi
from app.db.models import Batch
from app.db.repositories.base import Page
from app.db.repositories.batches import BatchRepository


class MessageBatchRepository(BatchRepository):
    def scoped(self, project: str | None) -> Select[Batch]:
        return super().scoped(project).where(Batch.api == BatchApi.ANTHROPIC)

    async def page_before(self, project: str, *, before: str, limit: int) -> Page[Batch]:
        """Up to `limit` batches newer than `before`, the nearest ones, newest first;
        `has_more` says newer ones follow."""
        page = await self.page(project, after=before, limit=limit, descending=False)
        page.items.reverse()
        return page
