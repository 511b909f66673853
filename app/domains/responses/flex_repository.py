"""SQL for flex requests (`service_tier: "flex"`): the one-line batches a synchronous call waits
for. They run as any batch does (repositories/batches.py); no API lists them."""

from __future__ import annotations

from sqlalchemy import Select, select, update

from app.core.batch_kinds import BatchApi
from app.core.statuses import CANCELLABLE_BATCH_STATUSES, BatchStatus, batch_moves_from
from app.db.base import rowcount
from app.db.models import Batch
from app.db.repositories.batches import BatchRepository
from app.domains.responses.repository import line_started


class FlexRepository(BatchRepository):
    def scoped(self, project: str | None) -> Select[Batch]:
        return self.not_deleted(project).where(Batch.api == BatchApi.FLEX)

    async def state(self, batch_id: str) -> tuple[Batch, bool] | None:
        """The batch, fresh from the database, and whether its line has started."""
        statement = select(Batch, line_started(batch_id)).where(Batch.id == batch_id, Batch.api == BatchApi.FLEX)
        row = (await self.session.execute(statement.execution_options(populate_existing=True))).first()
        return None if row is None else (row[0], bool(row[1]))

    async def cancel_unstarted(self, project: str, batch_id: str, now: int) -> bool:
        """Cancel the batch only if its line has not started; False if it has (or it ended)."""
        result = await self.session.execute(
            update(Batch)
            .where(
                Batch.project == project,
                Batch.id == batch_id,
                Batch.status.in_(batch_moves_from(BatchStatus.CANCELLING, CANCELLABLE_BATCH_STATUSES)),
                ~line_started(batch_id),
            )
            .values(status=BatchStatus.CANCELLING, cancelling_at=now)
        )
        return rowcount(result) == 1
