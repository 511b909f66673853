"""One webhook attempt: the URL check, the signed POST, and the rules for which secrets sign it
and how long to wait before the next attempt (used by the background sender and the test event)."""

from __future__ import annotations

import time
from dataclasses import dataclass

import httpx

from app.core.config import Settings
from app.core.webhook_signing import signed_headers
from app.services import webhook_urls


@dataclass
class AttemptResult:
    status_code: int | None
    error: str | None

    @property
    def ok(self) -> bool:
        return self.status_code is not None and 200 <= self.status_code < 300


async def send_once(
    client: httpx.AsyncClient, settings: Settings, url: str, secrets: list[str], message_id: str, body: bytes
) -> AttemptResult:
    """One signed POST (no redirects: a redirect could lead anywhere the URL check forbids)."""
    try:
        await webhook_urls.check(url, settings.webhook_allowed_hosts())
    except webhook_urls.UnsafeUrl as exc:
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
