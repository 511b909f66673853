"""Finalize's read-ahead of checkpoint chunks (app/worker/chunks.read_ahead): results come in the
items' order whatever order the reads end in, no more than `ahead + 1` reads run at once, and
reads still going when the caller stops are cancelled."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from contextlib import aclosing

from app.worker.chunks import read_ahead


async def _items(n: int) -> AsyncIterator[int]:
    for i in range(n):
        yield i


class _Reads:
    """Reads that end when the test lets them, counting how many run at once."""

    def __init__(self) -> None:
        self.running: set[int] = set()
        self.most = 0
        self.started: list[int] = []
        self.cancelled: list[int] = []
        self.gates: dict[int, asyncio.Event] = {}

    def gate(self, item: int) -> asyncio.Event:
        return self.gates.setdefault(item, asyncio.Event())

    async def read(self, item: int) -> str:
        self.started.append(item)
        self.running.add(item)
        self.most = max(self.most, len(self.running))
        try:
            await self.gate(item).wait()
            return f"r{item}"
        except asyncio.CancelledError:
            self.cancelled.append(item)
            raise
        finally:
            self.running.discard(item)


def test_results_keep_the_items_order_and_reads_stay_bounded():
    async def run() -> None:
        reads = _Reads()
        got: list[tuple[int, str]] = []

        async def consume() -> None:
            async for item, result in read_ahead(_items(10), reads.read, 3):
                got.append((item, result))

        consumer = asyncio.create_task(consume())
        for _ in range(5):
            await asyncio.sleep(0)
        assert reads.started == [0, 1, 2, 3]  # the first item's read and three ahead, no more
        # Later reads end first: nothing comes out of turn.
        for item in (3, 2, 1):
            reads.gate(item).set()
        for _ in range(5):
            await asyncio.sleep(0)
        assert got == []
        for item in range(10):
            reads.gate(item).set()
        await consumer
        assert got == [(i, f"r{i}") for i in range(10)]
        assert reads.most == 4

    asyncio.run(run())


def test_a_caller_that_stops_cancels_the_reads_ahead():
    async def run() -> None:
        reads = _Reads()
        reads.gate(0).set()
        async with aclosing(read_ahead(_items(10), reads.read, 2)) as results:
            async for item, _ in results:
                assert item == 0
                break
        assert sorted(reads.cancelled) == [1, 2]
        assert reads.running == set()

    asyncio.run(run())


def test_a_failed_read_raises_in_its_turn():
    async def run() -> None:
        async def read(item: int) -> int:
            if item == 2:
                raise OSError("the store is gone")
            return item

        got = []
        try:
            async for item, _ in read_ahead(_items(5), read, 2):
                got.append(item)
        except OSError:
            pass
        else:
            raise AssertionError("the failed read did not raise")
        assert got == [0, 1]

    asyncio.run(run())
