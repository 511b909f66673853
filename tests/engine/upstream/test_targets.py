"""The per-URL window (AIMD) and the least-outstanding choice of URL."""

from __future__ import annotations

import asyncio
import time

import pytest

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


def test_a_freed_slot_wakes_one_waiter_and_no_other():
    """Lines beyond the fleet's capacity wait in the pool (the worker's surplus): a release
    hands its slot to the first waiter and leaves the rest asleep, each still in its place
    (a woken waiter with no room re-queues: a wasted wake-up per line, W8)."""

    async def scenario():
        target = Target("http://a/v1", 2, 10)
        pool = TargetPool("m", [target])
        pool.set_state(target, "up")
        held = [await pool.acquire(), await pool.acquire()]
        waiting = [asyncio.ensure_future(pool.acquire()) for _ in range(3)]
        await asyncio.sleep(0)
        queued = list(pool._waiters)
        pool.release(held[0])
        await asyncio.sleep(0)
        await asyncio.sleep(0)
        assert [w.done() for w in waiting] == [True, False, False]
        # The two still waiting are the same futures as before: neither was woken and re-queued.
        assert list(pool._waiters) == queued[1:]
        pool.release(held[1])
        pool.release(await waiting[0])  # each release wakes the next waiter in line
        await asyncio.wait_for(asyncio.gather(waiting[1], waiting[2]), timeout=1)
        assert target.outstanding == 2 and not pool._waiters

    asyncio.run(scenario())


def test_a_waiter_past_its_deadline_gets_timeout_error_and_leaves_the_queue():
    """The pool keeps one timer for every waiter's deadline: each fails at its own, the others
    keep waiting in their places, and a release still goes to the first of them."""

    async def scenario():
        target = Target("http://a/v1", 1, 10)
        pool = TargetPool("m", [target])
        pool.set_state(target, "up")
        held = await pool.acquire()
        now = time.monotonic()
        late = asyncio.ensure_future(pool.acquire(now + 60))
        soon = asyncio.ensure_future(pool.acquire(now + 0.05))
        never = asyncio.ensure_future(pool.acquire())
        await asyncio.sleep(0)
        with pytest.raises(TimeoutError):
            await asyncio.wait_for(soon, timeout=2)
        assert [future for future, _ in pool._waiters] and not late.done() and not never.done()
        assert pool._expiry_at == pytest.approx(now + 60)  # re-armed for the next deadline
        late.cancel()
        with pytest.raises(asyncio.CancelledError):
            await late
        pool.release(held)
        assert (await asyncio.wait_for(never, timeout=1)) is target
        assert not pool._waiters and target.outstanding == 1

    asyncio.run(scenario())


def test_a_deadline_already_past_times_out_at_once():
    async def scenario():
        target = Target("http://a/v1", 1, 10)
        pool = TargetPool("m", [target])
        pool.set_state(target, "up")
        await pool.acquire()
        with pytest.raises(TimeoutError):
            await asyncio.wait_for(pool.acquire(time.monotonic() - 1), timeout=1)
        assert not pool._waiters

    asyncio.run(scenario())
