"""Write a batch's ending to the webhook outbox, inside the transaction that ends the batch: the
event exists if and only if the terminal status committed, whatever crashes afterwards."""

from __future__ import annotations

import json
import time
import uuid

from sqlalchemy.ext.asyncio import AsyncSession

from app.core.statuses import WebhookEventType
from app.db.models import WebhookEvent
from app.db.repositories.webhooks import WebhookRepository
from app.domains.webhooks.endpoints_repository import WebhookEndpointRepository


def new_event_id() -> str:
    return f"evt_{uuid.uuid4().hex}"


def event_body(event_id: str, event_type: WebhookEventType, created_at: int, batch_id: str) -> str:
    """The JSON OpenAI sends (see openai-python types/webhooks/batch_*_webhook_event.py)."""
    return json.dumps(
        {"id": event_id, "object": "event", "type": event_type, "created_at": created_at, "data": {"id": batch_id}},
        separators=(",", ":"),
    )


async def enqueue_batch_event(session: AsyncSession, batch_id: str, project: str, event_type: WebhookEventType) -> None:
    """Record the event and one pending delivery per subscribed endpoint of the project (and the
    endpoint registered with the batch, if any). Call it in the same transaction as the status
    change (no commit here). A batch's own endpoint not subscribed to this ending has nothing
    more to receive: it is removed now (else once its delivery ends)."""
    now = int(time.time())
    event_id = new_event_id()
    repo = WebhookRepository(session)
    event = WebhookEvent(
        id=event_id,
        project=project,
        type=event_type,
        batch_id=batch_id,
        body=event_body(event_id, event_type, now, batch_id),
        created_at=now,
    )
    if await repo.add_event(event):
        subscribed = await repo.subscribed_endpoint_ids(project, event_type, batch_id)
        await repo.add_deliveries(event_id, subscribed, now)
        endpoints = WebhookEndpointRepository(session)
        for endpoint_id in await endpoints.bound_to(batch_id):
            if endpoint_id not in subscribed:
                await endpoints.remove_batch_bound(endpoint_id)
