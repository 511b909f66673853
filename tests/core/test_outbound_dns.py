"""The outbound guard's DNS lookups (app/core/outbound.py) are bounded: a resolver that hangs
(injected here; no real query leaves the test) makes the request refused after DNS_TIMEOUT_S,
and its lookups hold the guard's own threads, never the default thread pool the rest of the
process shares."""

from __future__ import annotations

import asyncio
import threading
import time

import httpx
import pytest

from app.core import outbound
from app.core.outbound import OutboundPolicy, OutboundRefused


def test_a_hanging_resolver_is_cut_at_the_timeout_off_the_default_pool(monkeypatch):
    unblock = threading.Event()
    lookups: list[str] = []

    def hangs(host: str, port: int) -> list[tuple]:
        lookups.append(threading.current_thread().name)
        unblock.wait(30)
        raise OSError("released by the test")

    monkeypatch.setattr(outbound, "_lookup", hangs)
    monkeypatch.setattr(outbound, "DNS_TIMEOUT_S", 0.3)

    async def scenario() -> None:
        loop = asyncio.get_running_loop()
        started = time.monotonic()
        # More lookups at once than the guard has threads: every one still ends at the timeout.
        vets = [OutboundPolicy().vet(httpx.URL(f"http://hangs-{n}.test/")) for n in range(outbound.DNS_THREADS + 4)]
        results = await asyncio.gather(*vets, return_exceptions=True)
        took = time.monotonic() - started
        assert all(isinstance(r, OutboundRefused) and "within 0.3 s" in str(r) for r in results), results
        assert took < 1.5, took
        # The hung lookups still hold the guard's threads; the default pool answers at once.
        started = time.monotonic()
        assert await asyncio.wait_for(loop.run_in_executor(None, lambda: 42), 1) == 42
        assert time.monotonic() - started < 0.5

    try:
        asyncio.run(scenario())
    finally:
        unblock.set()
    assert lookups and all(name.startswith("batchd-dns") for name in lookups)


def test_the_timeout_is_a_refusal_of_the_whole_request(monkeypatch):
    unblock = threading.Event()
    monkeypatch.setattr(outbound, "_lookup", lambda host, port: unblock.wait(30) and [])
    monkeypatch.setattr(outbound, "DNS_TIMEOUT_S", 0.2)

    async def scenario() -> None:
        async with outbound.guarded_client(OutboundPolicy(), timeout=5) as client:
            with pytest.raises(OutboundRefused, match="could not be resolved within"):
                await client.get("http://hangs.test/")

    try:
        asyncio.run(scenario())
    finally:
        unblock.set()
