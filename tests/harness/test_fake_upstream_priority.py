"""The fake upstream serves its waiting queue as vLLM's priority scheduler does: lowest
``priority`` first (none counts as 0), then arrival order; the log says when each request left
the queue and at which priority it waited. Driven in-process over HTTP, one slot per port."""

from __future__ import annotations

import asyncio

import httpx

from harness.fake_upstream import FakeUpstream
from harness.ports import free_port

DELAY_S = 0.05


async def _served_after_a_running_one(queued: list[tuple[str, int | None]]) -> list[tuple[str, int]]:
    """Start one request, queue `queued` ((user, priority)) behind it one by one, and return
    (user, priority) in the order the fleet started serving them."""
    fake = FakeUpstream("m", DELAY_S, max_concurrency=1)
    port = free_port()
    server = await fake.serve(port)
    url = f"http://127.0.0.1:{port}/v1/chat/completions"

    def body(user: str, priority: int | None) -> dict:
        message = {"model": "m", "messages": [{"role": "user", "content": user}], "user": user}
        return message if priority is None else {**message, "priority": priority}

    try:
        async with httpx.AsyncClient(timeout=30) as client:
            # The running request holds the slot for DELAY_S x (all queued + 1), long enough to queue
            # the others behind it.
            fake.delay_s = DELAY_S * (len(queued) + 1)
            sent = [asyncio.create_task(client.post(url, json=body("running", None)))]
            await _until(fake, lambda: fake.stats["in_flight"] == 1)
            fake.delay_s = DELAY_S
            for n, (user, priority) in enumerate(queued, start=1):
                sent.append(asyncio.create_task(client.post(url, json=body(user, priority))))
                await _until(fake, lambda n=n: fake.stats["waiting"] == n)
            answers = await asyncio.gather(*sent)
    finally:
        server.close()
        await server.wait_closed()
    assert [a.status_code for a in answers] == [200] * len(answers)
    assert fake.log[0][2] == "running"
    ordered = sorted(fake.log[1:])
    return [(user, priority) for _, _, user, priority in ordered]


async def _until(fake, condition) -> None:
    """Until `condition()` holds (about half a second at most), else the fake's stats."""
    for _ in range(500):
        if condition():
            return
        await asyncio.sleep(0.001)
    raise AssertionError(f"fake upstream stats: {dict(fake.stats)}")


def test_the_waiting_queue_is_served_lowest_priority_first():
    served = asyncio.run(_served_after_a_running_one([("p5", 5), ("p1", 1), ("p3", 3)]))
    assert served == [("p1", 1), ("p3", 3), ("p5", 5)]


def test_equal_priorities_are_first_come_first_served_and_none_counts_as_zero():
    queued = [("a", 2), ("none", None), ("b", 2), ("zero", 0), ("c", 2), ("neg", -1)]
    served = asyncio.run(_served_after_a_running_one(queued))
    assert served == [("neg", -1), ("none", 0), ("zero", 0), ("a", 2), ("b", 2), ("c", 2)]


async def _served_after_a_hold(queued: list[tuple[str, int]]) -> tuple[int, list[tuple[str, int]]]:
    """Send `queued` ((user, priority)) one by one to a held fake with one slot, then release it
    over HTTP; returns how many it answered before the release and the order it served them."""
    fake = FakeUpstream("m", DELAY_S, max_concurrency=1, held=True)
    port = free_port()
    server = await fake.serve(port)
    base = f"http://127.0.0.1:{port}"

    try:
        async with httpx.AsyncClient(timeout=30) as client:
            sent = []
            for n, (user, priority) in enumerate(queued, start=1):
                message = {"model": "m", "messages": [{"role": "user", "content": user}], "user": user}
                sent.append(
                    asyncio.create_task(
                        client.post(f"{base}/v1/chat/completions", json=message | {"priority": priority})
                    )
                )
                await _until(fake, lambda n=n: fake.stats["waiting"] == n)
            await asyncio.sleep(3 * DELAY_S)  # a free slot, yet nothing runs while held
            before = len(fake.log) + fake.stats["in_flight"]
            assert (await client.get(f"{base}/_release")).status_code == 200
            answers = await asyncio.gather(*sent)
    finally:
        server.close()
        await server.wait_closed()
    assert [a.status_code for a in answers] == [200] * len(answers)
    return before, [(user, priority) for _, _, user, priority in sorted(fake.log)]


def test_a_held_fleet_serves_nothing_until_released_then_lowest_priority_first():
    before, served = asyncio.run(_served_after_a_hold([("first", 5), ("second", 1), ("third", 3)]))
    assert before == 0
    assert served == [("second", 1), ("third", 3), ("first", 5)]
