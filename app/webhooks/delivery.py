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
from dataclasses import dataclass

import httpx

from app import metrics
from app.config import Settings
from app.db.engine import Database
from app.db.repositories.webhooks import ClaimedDelivery, WebhookRepository
from app.webhooks import url_guard
from app.webhooks.signing import signed_headers
from app.worker.context import fault_point

log = logging.getLogger("batchd.webhooks")

CLAIM_BATCH = 16


@dataclass
class AttemptResult:
    status_code: int | None
    error: str | None

    @property
    def ok(self) -> bool:
        return self.status_code is not None and 200 <= self.status_code < 300


async def send_once(client: httpx.AsyncClient, settings: Settings, url: str, secrets: list[str],
                    message_id: str, body: bytes) -> AttemptResult:
    """One signed POST (no redirects: a redirect could lead anywhere the URL check forbids)."""
    try:
        await url_guard.check(url, settings.webhook_allowed_hosts())
    except url_guard.UnsafeUrl as exc:
        return AttemptResult(None, str(exc))
    headers = signed_headers(secrets, message_id, int(time.time()), body)
    try:
        response = await client.post(url, content=body, headers=headers, follow_redirects=False)
    except httpx.HTTPError as exc:
        return AttemptResult(None, f"{type(exc).__name__}: {exc}")
    return AttemptResult(response.status_code, None if 200 <= response.status_code < 300 else response.text[:200])


def secrets_in_use(secret: str, previous: str | None, previous_expires_at: int | None, now: float) -> list[str]:
    if previous and previous_expires_at and previous_expires_at > now:
        return [secret, previous]
    return [secret]


def retry_delay(settings: Settings, attempts: int) -> float:
    """Wait after the `attempts`-th failure: base, 2x base, 4x base, ... capped."""
    return min(settings.webhook_retry_base_seconds * 2 ** (attempts - 1), settings.webhook_retry_max_delay_seconds)


class WebhookSender:
    def __init__(self, db: Database, settings: Settings) -> None:
        self.db = db
        self.settings = settings
        # The lease must outlive one attempt, so a live sender never loses it mid-request.
        self.lease_seconds = settings.webhook_timeout_seconds + 5
        self.client = httpx.AsyncClient(timeout=settings.webhook_timeout_seconds)

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
        result = await send_once(self.client, self.settings, delivery.url, secrets, delivery.event_id,
                                 delivery.body.encode())
        metrics.record_webhook_delivery(result.ok)
        now = time.time()
        if result.ok:
            status, next_at = "delivered", None
        elif now - delivery.event_created_at >= self.settings.webhook_retry_horizon_seconds:
            status, next_at = "failed", None
        else:
            status, next_at = "pending", now + retry_delay(self.settings, delivery.attempts)
        async with self.db.write() as session:
            repo = WebhookRepository(session)
            recorded = await repo.finish_attempt(delivery.id, token, status=status, next_attempt_at=next_at,
                                                 status_code=result.status_code, error=result.error, now=int(now))
            if not recorded:
                return
            if result.ok:
                await repo.endpoint_succeeded(delivery.endpoint_id)
            elif await repo.endpoint_failed(delivery.endpoint_id, int(now), self.settings.webhook_disable_after_seconds):
                log.warning("webhook endpoint %s disabled: its deliveries failed for %.0f s", delivery.endpoint_id,
                            self.settings.webhook_disable_after_seconds)
        if not result.ok:
            log.info("webhook %s to %s failed (attempt %d, %s): %s", delivery.event_id, delivery.endpoint_id,
                     delivery.attempts, status, result.error or result.status_code)
