"""The background sender: claims due deliveries from the outbox, POSTs them signed, and records
the result: delivered on a 2xx; otherwise another attempt after an exponential backoff, until
the retry horizon (72 h by default) has passed since the event. Every attempt of an event sends
the same `webhook-id` and body, with a fresh timestamp and signature.

Runs in every replica; the claim (a lease plus a token, see WebhookRepository.claim_due) makes
sure one of them sends each attempt. A process killed mid-attempt leaves a lease that expires,
and the attempt is made again (at least once)."""

from __future__ import annotations

import asyncio
import logging
import time
import uuid

from app.core import metrics
from app.core.config import Settings
from app.core.faults import fault_point
from app.core.outbound import guarded_client
from app.core.statuses import WebhookDeliveryStatus
from app.db.engine import Database
from app.db.repositories.webhooks import ClaimedDelivery, WebhookRepository
from app.services.webhooks.delivery import retry_delay, secrets_in_use, send_once

log = logging.getLogger("batchd.webhooks")

CLAIM_BATCH = 16


class WebhookSender:
    def __init__(self, db: Database, settings: Settings) -> None:
        self.db = db
        self.settings = settings
        # The lease must outlive one attempt, so a live sender never loses it mid-request.
        self.lease_seconds = settings.webhook_timeout_seconds + 5
        self.client = guarded_client(settings.outbound_policy(), timeout=settings.webhook_timeout_seconds)

    async def run_forever(self) -> None:
        try:
            while True:
                try:
                    claimed = await self.deliver_due()
                except Exception:  # noqa: BLE001 - e.g. a busy database; try again next poll
                    log.warning("webhook delivery round failed", exc_info=True)
                    claimed = 0
                if claimed < CLAIM_BATCH:
                    await asyncio.sleep(self.settings.webhook_poll_seconds)
        finally:
            await self.client.aclose()

    async def deliver_due(self) -> int:
        """Make every due attempt (up to CLAIM_BATCH, concurrently); how many were claimed."""
        token = uuid.uuid4().hex
        async with self.db.read() as session:
            if not await WebhookRepository(session).any_due(time.time()):
                return 0
        async with self.db.write() as session:
            claimed = await WebhookRepository(session).claim_due(time.time(), self.lease_seconds, token, CLAIM_BATCH)
        if claimed:
            await fault_point("webhook_sending", self.settings.data_dir)
            await asyncio.gather(*(self._attempt(d, token) for d in claimed))
        return len(claimed)

    async def _attempt(self, delivery: ClaimedDelivery, token: str) -> None:
        now = time.time()
        secrets = secrets_in_use(delivery.secret, delivery.previous_secret, delivery.previous_secret_expires_at, now)
        result = await send_once(self.client, delivery.url, secrets, delivery.event_id, delivery.body.encode())
        metrics.record_webhook_delivery(result.ok)
        now = time.time()
        if result.ok:
            status, next_at = WebhookDeliveryStatus.DELIVERED, None
        elif now - delivery.event_created_at >= self.settings.webhook_retry_horizon_seconds:
            status, next_at = WebhookDeliveryStatus.FAILED, None
        else:
            status, next_at = WebhookDeliveryStatus.PENDING, now + retry_delay(self.settings, delivery.attempts)
        async with self.db.write() as session:
            repo = WebhookRepository(session)
            recorded = await repo.finish_attempt(
                delivery.id,
                token,
                status=status,
                next_attempt_at=next_at,
                status_code=result.status_code,
                error=result.error,
                now=int(now),
            )
            if not recorded:
                return
            if result.ok:
                await repo.endpoint_succeeded(delivery.endpoint_id)
            elif await repo.endpoint_failed(
                delivery.endpoint_id, int(now), self.settings.webhook_disable_after_seconds
            ):
                log.warning(
                    "webhook endpoint %s disabled: its deliveries failed for %.0f s",
                    delivery.endpoint_id,
                    self.settings.webhook_disable_after_seconds,
                )
        if not result.ok:
            log.info(
                "webhook %s to %s failed (attempt %d, %s): %s",
                delivery.event_id,
                delivery.endpoint_id,
                delivery.attempts,
                status,
                result.error or result.status_code,
            )
