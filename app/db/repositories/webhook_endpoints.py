"""SQL for a project's webhook endpoints (the outbox and deliveries: repositories/webhooks.py)."""

from __future__ import annotations

from app.db.models import WebhookEndpoint
from app.db.repositories.base import ProjectScopedRepository


class WebhookEndpointRepository(ProjectScopedRepository[WebhookEndpoint]):
    model = WebhookEndpoint

    async def delete(self, endpoint: WebhookEndpoint) -> None:
        await self.session.delete(endpoint)
        await self.session.flush()
