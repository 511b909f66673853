"""Where open mode (no keys configured: every caller is the operator) is safe: on this machine
only. `batchd serve` binds loopback only; requests must name the server by a loopback name (a
web page cannot reach it through a name of its own, DNS rebinding) and come from no foreign
origin (a web page cannot post to it); and no route mints a key."""

from __future__ import annotations

import ipaddress
from urllib.parse import urlsplit

from app.core.errors import Forbidden, MisdirectedRequest

LOCALHOST = "localhost"

REFUSED_BIND = (
    "batchd serve: refusing to serve {host} in open mode (no API keys configured, so anyone who can "
    "reach it is admin): set BATCHD_API_KEYS or BATCHD_ADMIN_KEYS, or create a key with "
    "`batchd keys create --admin`, or pass --allow-open-mode (BATCHD_ALLOW_OPEN_MODE=true)"
)


def is_loopback(host: str) -> bool:
    """`localhost`, or an IP address (IPv6 with or without brackets) of the loopback range."""
    host = host.strip().lower().removeprefix("[").removesuffix("]")
    if host == LOCALHOST:
        return True
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:
        return False


def _host_name(host_header: str) -> str:
    """The name of a `Host` value, its port left off (`[::1]:8000` -> `[::1]`)."""
    if host_header.startswith("["):
        return host_header.partition("]")[0] + "]"
    return host_header.rpartition(":")[0] if host_header.count(":") == 1 else host_header


def check_local_request(host: str | None, origin: str | None) -> None:
    """Raise unless an open-mode request names the server by a loopback name and carries no
    origin but the server's own (the same host and port the request names)."""
    if not host or not is_loopback(_host_name(host)):
        raise MisdirectedRequest(
            f"This server runs in open mode (no API keys) and answers only for localhost, 127.0.0.1 "
            f"or [::1], not for Host '{host or ''}'. Configure keys to serve other names.",
            code="open_mode_host",
        )
    if origin is not None and urlsplit(origin).netloc.lower() != host.lower():
        raise Forbidden(
            f"This server runs in open mode (no API keys) and refuses requests from other origins "
            f"('{origin}'); only its own pages (/ui) may call it.",
            code="open_mode_origin",
        )


def refuse_minting() -> Forbidden:
    return Forbidden(
        "No key can be created in open mode (no API keys configured): whoever reached the server "
        "first would own it. Set BATCHD_ADMIN_KEYS or run `batchd keys create --admin` on the server.",
        code="open_mode",
    )
