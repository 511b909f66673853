"""Which URLs may receive webhooks: http(s), a host, no credentials, and a destination the
outbound policy (app/core/outbound.py) allows. Checked when an endpoint is saved, so a mistake
is a 400 at once; every delivery is checked again by the guarded client (DNS can change)."""

from __future__ import annotations

from urllib.parse import urlsplit

import httpx

from app.core.outbound import OutboundPolicy, OutboundRefused
from app.domains.webhooks.schemas import MAX_URL


class UnsafeUrl(ValueError):
    """The URL may not receive webhooks; the message says why."""


def parse(url: object) -> str:
    """`url` if it is a syntactically acceptable webhook URL, else UnsafeUrl."""
    if not isinstance(url, str) or len(url) > MAX_URL:
        raise UnsafeUrl(f"The URL must be a string of at most {MAX_URL} characters.")
    try:
        parts = urlsplit(url)
        parts.port  # noqa: B018 - raises on a port out of range
    except ValueError as exc:
        raise UnsafeUrl(f"The URL is not valid: {exc}.") from None
    if parts.scheme not in ("http", "https"):
        raise UnsafeUrl("The URL must use http or https.")
    if not parts.hostname:
        raise UnsafeUrl("The URL must name a host.")
    if parts.username or parts.password:
        raise UnsafeUrl("The URL must not carry credentials.")
    return url


async def check(url: object, policy: OutboundPolicy) -> str:
    """`url` if it may receive webhooks now, else UnsafeUrl."""
    checked = parse(url)
    try:
        await policy.vet(httpx.URL(checked))
    except (OutboundRefused, httpx.InvalidURL) as exc:
        raise UnsafeUrl(str(exc)) from None
    return checked
