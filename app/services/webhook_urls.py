"""Refuse webhook URLs that would make batchd call into its own network (SSRF): only http(s),
and no host that resolves to a loopback, link-local, private or otherwise non-public address,
unless the operator listed the host in BATCHD_WEBHOOK_ALLOW_HOSTS.

Checked when an endpoint is saved and again before every attempt (DNS can change between)."""

from __future__ import annotations

import asyncio
import ipaddress
import socket
from urllib.parse import urlsplit

from app.schemas.webhooks import MAX_URL


class UnsafeUrl(ValueError):
    """The URL may not receive webhooks; the message says why."""


def parse(url: object) -> tuple[str, int]:
    """(host, port) of a syntactically acceptable URL, else UnsafeUrl."""
    if not isinstance(url, str) or len(url) > MAX_URL:
        raise UnsafeUrl(f"The URL must be a string of at most {MAX_URL} characters.")
    try:
        parts = urlsplit(url)
        port = parts.port
    except ValueError as exc:
        raise UnsafeUrl(f"The URL is not valid: {exc}.") from None
    if parts.scheme not in ("http", "https"):
        raise UnsafeUrl("The URL must use http or https.")
    if not parts.hostname:
        raise UnsafeUrl("The URL must name a host.")
    if parts.username or parts.password:
        raise UnsafeUrl("The URL must not carry credentials.")
    return parts.hostname.lower(), port or (443 if parts.scheme == "https" else 80)


def _is_public(address: str) -> bool:
    ip = ipaddress.ip_address(address.split("%", 1)[0])
    if isinstance(ip, ipaddress.IPv6Address) and ip.ipv4_mapped is not None:
        ip = ip.ipv4_mapped
    return ip.is_global and not ip.is_multicast


async def check(url: object, allowed_hosts: set[str]) -> None:
    """Raise UnsafeUrl unless `url` may receive webhooks now."""
    host, port = parse(url)
    if host in allowed_hosts:
        return
    try:
        infos = await asyncio.get_running_loop().getaddrinfo(host, port, type=socket.SOCK_STREAM)
    except (OSError, UnicodeError):  # UnicodeError: not a valid DNS name (say a label over 63 characters)
        raise UnsafeUrl(f"The host {host!r} could not be resolved.") from None
    for info in infos:
        if not _is_public(str(info[4][0])):
            raise UnsafeUrl(
                f"The host {host!r} resolves to a non-public address ({info[4][0]}); list it in "
                "BATCHD_WEBHOOK_ALLOW_HOSTS to allow it."
            )
