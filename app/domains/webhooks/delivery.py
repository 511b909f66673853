"""One webhook attempt: the URL check, the signed POST, and the rules for which secrets sign it
and how long to wait before the next attempt (used by the background sender and the test event)."""

from __future__ import annotations

import asyncio
import time
from dataclasses import dataclass

import httpx

from app.core.config import Settings
from app.core.outbound import OutboundRefused
from app.core.webhook_signing import signed_headers
from app.domains.webhooks import urls as webhook_urls

# The most of a receiver's reply an attempt reads (and drops): its status code is the answer.
KEEP_REPLY_BYTES = 4096


@dataclass
class AttemptResult:
    status_code: int | None
    error: str | None

    @property
    def ok(self) -> bool:
        return self.status_code is not None and 200 <= self.status_code < 300


async def send_once(
    client: httpx.AsyncClient, url: str, secrets: list[str], message_id: str, body: bytes, timeout: float
) -> AttemptResult:
    """One signed POST through the guarded client (no redirects: a webhook receiver answers
    where it was registered). The recorded error names the failure's kind, never what a
    receiver said: its status code is kept, its body is not.

    `timeout` is the whole attempt's, DNS to last byte: a receiver trickling its reply is cut
    there. The reply is asked for as is (`identity`), never decompressed, and read to at most
    KEEP_REPLY_BYTES, so no receiver's reply costs more than that, however large or packed."""
    try:
        webhook_urls.parse(url)
    except webhook_urls.UnsafeUrl as exc:
        return AttemptResult(None, str(exc))
    headers = {**signed_headers(secrets, message_id, int(time.time()), body), "accept-encoding": "identity"}
    try:
        async with asyncio.timeout(timeout):
            request = client.build_request("POST", url, content=body, headers=headers)
            response = await client.send(request, stream=True, follow_redirects=False)
            try:
                kept = 0
                async for chunk in response.aiter_raw():
                    kept += len(chunk)
                    if kept >= KEEP_REPLY_BYTES:
                        break
            finally:
                await response.aclose()
    except TimeoutError:
        return AttemptResult(None, f"The request timed out after {timeout:g} s.")
    except OutboundRefused as exc:
        return AttemptResult(None, str(exc))
    except httpx.HTTPError as exc:
        return AttemptResult(None, f"The request failed ({type(exc).__name__}).")
    return AttemptResult(response.status_code, None)


def secrets_in_use(secret: str, previous: str | None, previous_expires_at: int | None, now: float) -> list[str]:
    if previous and previous_expires_at and previous_expires_at > now:
        return [secret, previous]
    return [secret]


def retry_delay(settings: Settings, attempts: int) -> float:
    """Wait after the `attempts`-th failure: base, 2x base, 4x base, ... capped."""
    return min(settings.webhook_retry_base_seconds * 2 ** (attempts - 1), settings.webhook_retry_max_delay_seconds)
