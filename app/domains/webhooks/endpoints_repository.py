"""SQL for a project's webhook endpoints (the outbox and deliveries: repositories/webhooks.py)."""

from __future__ import annotations

from sqlalchemy import Select, delete, select

from app.db.models import Batch, WebhookDelivery, WebhookEndpoint, WebhookEvent
from app.db.repositories.base import ProjectScopedRepository


class WebhookEndpointRepository(ProjectScopedRepository[WebhookEndpoint]):
    model = WebhookEndpoint

    def scoped(self, project: str | None) -> Select[WebhookEndpoint]:
        """The project's own endpoints: one bound to a batch is that batch's, not listed."""
        return super().scoped(project).where(WebhookEndpoint.batch_id.is_(None))

    async def bound_to(self, batch_id: str) -> list[str]:
        """The ids of the endpoints registered with batch `batch_id`."""
        result = await self.session.execute(select(WebhookEndpoint.id).where(WebhookEndpoint.batch_id == batch_id))
        return list(result.scalars())

    async def stale_batch_bound(self, event_before: int) -> list[str]:
        """Batch-bound endpoints with nothing more to receive: their batch's event is older than
        `event_before` (its retries over), or their batch is gone."""
        event_batches = select(WebhookEvent.batch_id).where(WebhookEvent.created_at < event_before)
        result = await self.session.execute(
            select(WebhookEndpoint.id).where(
                WebhookEndpoint.batch_id.is_not(None),
                WebhookEndpoint.batch_id.in_(event_batches) | WebhookEndpoint.batch_id.not_in(select(Batch.id)),
            )
        )
        return list(result.scalars())

    async def remove_batch_bound(self, endpoint_id: str) -> None:
        """Remove `endpoint_id` with its deliveries if it is bound to a batch (its one event sent)."""
        bound = select_bound(endpoint_id)
        await self.session.execute(
            delete(WebhookDelivery)
            .where(WebhookDelivery.endpoint_id.in_(bound))
            .execution_options(synchronize_session=False)
        )
        await self.session.execute(
            delete(WebhookEndpoint)
            .where(WebhookEndpoint.id == endpoint_id, WebhookEndpoint.batch_id.is_not(None))
            .execution_options(synchronize_session=False)
        )

    async def delete(self, endpoint: WebhookEndpoint) -> None:
        await self.session.delete(endpoint)
        await self.session.flush()


def select_bound(endpoint_id: str) -> Select[str]:
    return select(WebhookEndpoint.id).where(WebhookEndpoint.id == endpoint_id, WebhookEndpoint.batch_id.is_not(None))
