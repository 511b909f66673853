"""The outbound policy: every URL the server fetches because a caller named it (webhook
deliveries and test events, audio lines' ``file_url``) goes through :func:`guarded_client`.

A request is allowed only over http(s), to a host whose every resolved address is public:
loopback, link-local (with 169.254.169.254, the cloud metadata address), private, CGNAT,
multicast, reserved and unspecified addresses are refused, also dressed as IPv6 (IPv4-mapped,
6to4, Teredo, NAT64). The operator lists the exceptions in ``BATCHD_OUTBOUND_ALLOW`` (host
names, addresses, CIDRs; ``BATCHD_WEBHOOK_ALLOW_HOSTS`` is read as more of the same list).

The host is resolved once, here, and the connection goes to the address that was checked (the
URL's name stays in the Host header and the TLS server name), so a resolver that answers a
public address to the check and a private one to the connect cannot redirect a request (DNS
rebinding). The client checks every redirect hop the same way. Refusals say "refused by the
outbound policy" and name neither the address the host resolved to nor anything that answered.

The lookups run on a small thread pool of their own, each bounded by ``DNS_TIMEOUT_S``: a
resolver that hangs holds neither the default thread pool (which file and database work share)
nor the request past that.
"""

from __future__ import annotations

import asyncio
import ipaddress
import os
import socket
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from typing import Any

import httpx

ALLOW_SETTING = "BATCHD_OUTBOUND_ALLOW"
WEBHOOK_ALLOW_SETTING = "BATCHD_WEBHOOK_ALLOW_HOSTS"
REFUSED = "refused by the outbound policy"

Address = ipaddress.IPv4Address | ipaddress.IPv6Address
Network = ipaddress.IPv4Network | ipaddress.IPv6Network
_NAT64 = ipaddress.IPv6Network("64:ff9b::/96")
# One lookup's deadline, and the threads lookups share (a hung one holds a thread, not the loop).
DNS_TIMEOUT_S = 5.0
DNS_THREADS = 4
_dns_pool: ThreadPoolExecutor | None = None


class OutboundRefused(httpx.TransportError):
    """The policy refused a request before anything was sent; the message says why."""


class DownloadRefused(Exception):
    """A download answered, but not with what was asked: a status other than 200, a compressed
    body, or more bytes than the limit. `status` is the status, `encoding` the body's
    Content-Encoding, `size` the size seen (neither status nor encoding: too large)."""

    def __init__(self, status: int | None = None, size: str = "", encoding: str = "") -> None:
        if status is not None:
            text = f"HTTP {status}"
        else:
            text = f"compressed ({encoding})" if encoding else f"too large ({size})"
        super().__init__(text)
        self.status = status
        self.size = size
        self.encoding = encoding


@dataclass(frozen=True)
class OutboundPolicy:
    """Which destinations beyond the public internet the operator allows."""

    hosts: frozenset[str] = frozenset()
    networks: tuple[Network, ...] = ()

    @classmethod
    def parse(cls, *lists: str) -> OutboundPolicy:
        """From comma-separated entries: an address or CIDR allows those addresses, anything
        else is a host name allowed whatever it resolves to."""
        hosts: set[str] = set()
        networks: list[Network] = []
        for entry in (item.strip().lower() for text in lists for item in text.split(",")):
            if not entry:
                continue
            try:
                networks.append(ipaddress.ip_network(entry.strip("[]"), strict=False))
            except ValueError:
                hosts.add(entry.rstrip("."))
        return cls(frozenset(hosts), tuple(networks))

    @classmethod
    def from_environ(cls) -> OutboundPolicy:
        """The policy of this process's environment (where no Settings is at hand)."""
        return cls.parse(os.environ.get(ALLOW_SETTING, ""), os.environ.get(WEBHOOK_ALLOW_SETTING, ""))

    def allows_address(self, address: Address) -> bool:
        return is_public(address) or any(address in network for network in self.networks)

    async def vet(self, url: httpx.URL) -> str:
        """The address to connect to for `url`, or OutboundRefused."""
        if url.scheme not in ("http", "https"):
            raise OutboundRefused(f"The URL's scheme {url.scheme!r} is {REFUSED} (http and https only).")
        host = url.host.lower().rstrip(".")
        if not host:
            raise OutboundRefused(f"A URL without a host is {REFUSED}.")
        addresses = await _resolve(host, url.port or (443 if url.scheme == "https" else 80))
        if host not in self.hosts and not all(self.allows_address(address) for address in addresses):
            raise OutboundRefused(
                f"The host {host!r} is {REFUSED}: it is not a public address. The operator may allow it "
                f"in {ALLOW_SETTING}."
            )
        return str(addresses[0])


def is_public(address: Address) -> bool:
    """Whether `address` is a public unicast address, judged also by the IPv4 address an IPv6
    form carries (so ::ffff:127.0.0.1 or 64:ff9b::a9fe:a9fe is not public)."""
    if isinstance(address, ipaddress.IPv6Address):
        if address.ipv4_mapped is not None:  # the kernel dials the IPv4 address itself
            return is_public(address.ipv4_mapped)
        embedded = _embedded_ipv4(address)
        if embedded is not None and not is_public(embedded):
            return False
    return address.is_global and not (address.is_multicast or address.is_reserved or address.is_unspecified)


def _embedded_ipv4(address: ipaddress.IPv6Address) -> ipaddress.IPv4Address | None:
    if address.sixtofour is not None:
        return address.sixtofour
    if address.teredo is not None:
        return address.teredo[1]
    if address in _NAT64:
        return ipaddress.IPv4Address(address.packed[12:])
    return None


async def _resolve(host: str, port: int) -> list[Address]:
    try:
        literal = ipaddress.ip_address(host.strip("[]"))
    except ValueError:
        pass
    else:
        return [literal]
    try:
        async with asyncio.timeout(DNS_TIMEOUT_S):
            infos = await asyncio.get_running_loop().run_in_executor(_dns_threads(), _lookup, host, port)
    except TimeoutError:
        raise OutboundRefused(f"The host {host!r} could not be resolved within {DNS_TIMEOUT_S:g} s.") from None
    except (OSError, UnicodeError):  # UnicodeError: not a valid DNS name (a label over 63 characters)
        raise OutboundRefused(f"The host {host!r} could not be resolved.") from None
    addresses = [ipaddress.ip_address(str(info[4][0]).split("%", 1)[0]) for info in infos]
    if not addresses:
        raise OutboundRefused(f"The host {host!r} could not be resolved.")
    return addresses


def _dns_threads() -> ThreadPoolExecutor:
    global _dns_pool
    if _dns_pool is None:
        _dns_pool = ThreadPoolExecutor(DNS_THREADS, thread_name_prefix="batchd-dns")
    return _dns_pool


def _lookup(host: str, port: int) -> list[tuple]:
    """The system resolver's answer (runs on a DNS thread; tests put a stub resolver here)."""
    return socket.getaddrinfo(host, port, type=socket.SOCK_STREAM)


class GuardedTransport(httpx.AsyncBaseTransport):
    """Vets each request (so each redirect hop) and sends it to the address it vetted."""

    def __init__(self, policy: OutboundPolicy) -> None:
        self.policy = policy
        # No keep-alive: the pool keys a connection by the address, so a connection opened (and
        # TLS-checked) for one name could otherwise carry a request for another name there.
        self._inner = httpx.AsyncHTTPTransport(limits=httpx.Limits(max_keepalive_connections=0))

    async def handle_async_request(self, request: httpx.Request) -> httpx.Response:
        address = await self.policy.vet(request.url)
        pinned = httpx.Request(
            request.method,
            request.url.copy_with(host=address),
            headers=request.headers,  # Host: the URL's name, set when the request was built
            stream=request.stream,
            extensions={**request.extensions, "sni_hostname": request.url.host},
        )
        return await self._inner.handle_async_request(pinned)

    async def aclose(self) -> None:
        await self._inner.aclose()


def guarded_client(policy: OutboundPolicy, **options: Any) -> httpx.AsyncClient:
    """An httpx client whose every request obeys `policy` (no proxy from the environment: a
    proxy would resolve the name again)."""
    return httpx.AsyncClient(transport=GuardedTransport(policy), trust_env=False, **options)


async def download(url: str, policy: OutboundPolicy, *, limit: int, timeout: float) -> bytes:
    """The body of `GET url` (redirects followed, each hop vetted), read up to `limit` bytes:
    an oversized one is stopped there, never held. `timeout` bounds the whole download, DNS to
    last byte (a server trickling bytes is cut there). The body is asked for as is (`identity`)
    and never decompressed: a compressed reply is refused, as a small one could inflate past
    any limit. Raises OutboundRefused, DownloadRefused, TimeoutError or another httpx error."""
    chunks: list[bytes] = []
    received = 0
    async with asyncio.timeout(timeout):
        async with guarded_client(policy, timeout=timeout, follow_redirects=True) as client:
            async with client.stream("GET", url, headers={"accept-encoding": "identity"}) as response:
                if response.status_code != 200:
                    raise DownloadRefused(status=response.status_code)
                encoding = response.headers.get("content-encoding", "identity").strip().lower()
                if encoding not in ("", "identity"):
                    raise DownloadRefused(encoding=encoding)
                declared = response.headers.get("content-length", "")
                if declared.isdigit() and int(declared) > limit:
                    raise DownloadRefused(size=f"{declared} bytes")
                async for chunk in response.aiter_raw():
                    received += len(chunk)
                    if received > limit:
                        raise DownloadRefused(size=f"more than {limit} bytes")
                    chunks.append(chunk)
    return b"".join(chunks)
