"""The background sender: claims due deliveries from the outbox, POSTs them signed, and records
the result: delivered on a 2xx; otherwise another attempt after an exponential backoff, until
the retry horizon (72 h by default) has passed since the event. Every attempt of an event sends
the same `webhook-id` and body, with a fresh timestamp and signature.

Runs in every replica; the claim (a lease plus a token, see WebhookRepository.claim_due) makes
sure one of them sends each attempt. A process killed mid-attempt leaves a lease that expires,
and the attempt is made again (at least once).

Each attempt runs as a task of its own, bounded by BATCHD_WEBHOOK_TIMEOUT_SECONDS from connect to
last byte: the sender claims more as soon as it has room, so a slow receiver holds its own
attempt and never the deliveries of another endpoint."""

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
from app.domains.webhooks.delivery import retry_delay, secrets_in_use, send_once
from app.domains.webhooks.endpoints_repository import WebhookEndpointRepository

log = logging.getLogger("batchd.webhooks")

CLAIM_BATCH = 16
# Attempts one sender has in flight at once: each holds a socket and at most one read's bytes.
MAX_IN_FLIGHT = 64


class WebhookSender:
    def __init__(self, db: Database, settings: Settings) -> None:
        self.db = db
        self.settings = settings
        # The lease must outlive one attempt, so a live sender never loses it mid-request.
        self.timeout = settings.webhook_timeout_seconds
        self.lease_seconds = self.timeout + 5
        self.client = guarded_client(settings.outbound_policy(), timeout=self.timeout)
        self._attempts: set[asyncio.Task[None]] = set()
        self._room = asyncio.Event()  # set when an attempt ends

    async def run_forever(self) -> None:
        try:
            while True:
                free = MAX_IN_FLIGHT - len(self._attempts)
                try:
                    claimed = await self.deliver_due(min(free, CLAIM_BATCH)) if free > 0 else 0
                except Exception:  # noqa: BLE001 - e.g. a busy database; try again next poll
                    log.warning("webhook delivery round failed", exc_info=True)
                    claimed = 0
                if free <= 0:
                    await self._until_room()
                elif claimed < min(free, CLAIM_BATCH):
                    await asyncio.sleep(self.settings.webhook_poll_seconds)
        finally:
            for task in self._attempts:
                task.cancel()
            await asyncio.gather(*self._attempts, return_exceptions=True)
            await self.client.aclose()

    async def _until_room(self) -> None:
        """Until an attempt ends (or the next poll)."""
        self._room.clear()
        try:
            await asyncio.wait_for(self._room.wait(), self.settings.webhook_poll_seconds)
        except TimeoutError:
            pass

    async def deliver_due(self, limit: int = CLAIM_BATCH) -> int:
        """Start every due attempt (up to `limit`), each in its own task; how many were claimed."""
        token = uuid.uuid4().hex
        async with self.db.read() as session:
            if not await WebhookRepository(session).any_due(time.time()):
                return 0
        async with self.db.write() as session:
            claimed = await WebhookRepository(session).claim_due(time.time(), self.lease_seconds, token, limit)
        if claimed:
            await fault_point("webhook_sending", self.settings.data_dir)
            for delivery in claimed:
                task = asyncio.create_task(self._attempt(delivery, token), name=f"webhook-{delivery.id}")
                self._attempts.add(task)
                task.add_done_callback(self._ended)
        return len(claimed)

    def _ended(self, task: asyncio.Task[None]) -> None:
        self._attempts.discard(task)
        self._room.set()
        if not task.cancelled() and task.exception() is not None:
            # E.g. a busy database when recording it: the lease expires and the attempt is made again.
            log.warning("webhook attempt failed", exc_info=task.exception())

    async def _attempt(self, delivery: ClaimedDelivery, token: str) -> None:
        now = time.time()
        secrets = secrets_in_use(delivery.secret, delivery.previous_secret, delivery.previous_secret_expires_at, now)
        result = await send_once(
            self.client, delivery.url, secrets, delivery.event_id, delivery.body.encode(), self.timeout
        )
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
            if status != WebhookDeliveryStatus.PENDING:  # a batch's own endpoint has no more to send
                await WebhookEndpointRepository(session).remove_batch_bound(delivery.endpoint_id)
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
