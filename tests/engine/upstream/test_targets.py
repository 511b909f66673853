"""The per-URL window (AIMD) and the least-outstanding choice of URL."""

from __future__ import annotations

import asyncio

from app.engine.upstream.targets import Target, TargetPool


def test_least_outstanding_routing_and_aimd():
    async def scenario():
        a, b = Target("http://a/v1", 4, 10), Target("http://b/v1", 4, 10)
        pool = TargetPool("m", [a, b])
        pool.set_state(a, "up")
        pool.set_state(b, "up")
        taken = [await pool.acquire() for _ in range(4)]
        assert (a.outstanding, b.outstanding) == (2, 2)
        pool.overloaded(a)  # a 429: the window halves, once per burst
        pool.overloaded(a)
        assert int(a.window) == 2
        assert await pool.acquire() is b and await pool.acquire() is b
        waiter = asyncio.ensure_future(pool.acquire())  # both full: waits
        await asyncio.sleep(0)
        assert not waiter.done()
        pool.release(taken[0])
        assert (await waiter) is taken[0]
        for _ in range(3):
            pool.failed(b, "connection refused")
        assert not b.in_rotation
        pool.succeeded(a)
        assert 2 < a.window < 3

    asyncio.run(scenario())
