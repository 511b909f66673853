"""The engine gate hands freed slots to batches in turn."""

import asyncio

from app.pipeline.fair_gate import FairGate


def test_slots_alternate_between_waiting_batches():
    async def scenario() -> list[str]:
        gate = FairGate(2)
        order: list[str] = []
        release = asyncio.Event()

        async def line(key: str) -> None:
            async with gate.slot(key):
                order.append(key)
                await release.wait()

        # Batch a queues six lines before batch b queues its six.
        tasks = [asyncio.create_task(line("a")) for _ in range(6)]
        tasks += [asyncio.create_task(line("b")) for _ in range(6)]
        await asyncio.sleep(0)
        release.set()
        await asyncio.gather(*tasks)
        return order

    order = asyncio.run(scenario())
    assert order[:2] == ["a", "a"]  # the first two found free slots
    assert order[2:8] == ["a", "b", "a", "b", "a", "b"]


def test_a_cancelled_waiter_gives_back_nothing_and_blocks_nobody():
    async def scenario() -> int:
        gate = FairGate(1)
        hold = asyncio.Event()

        async def holder():
            async with gate.slot("a"):
                await hold.wait()

        first = asyncio.create_task(holder())
        await asyncio.sleep(0)
        waiter = asyncio.create_task(holder())
        await asyncio.sleep(0)
        waiter.cancel()
        hold.set()
        await first
        await asyncio.gather(waiter, return_exceptions=True)
        async with gate.slot("b"):
            pass
        return gate._free

    assert asyncio.run(scenario()) == 1
