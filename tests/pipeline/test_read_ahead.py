"""The read-ahead of validation's input chunks and finalize's shards (app/pipeline/read_ahead.py):
results come in the items' order whatever order the reads end in, no more than `ahead + 1` items
are pulled and read before they are handed over, a failed pull or read raises in its turn, and
when the caller stops the pulling stops and reads still going are cancelled."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from contextlib import aclosing

import pytest

from app.pipeline.read_ahead import read_ahead


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
                for _ in range(5):  # the reads ahead get going
                    await asyncio.sleep(0)
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


class _Source:
    """Input chunks pulled one by one, counting how many were pulled."""

    def __init__(self, n: int, fail_at: int | None = None) -> None:
        self.n, self.fail_at = n, fail_at
        self.read = 0

    async def chunks(self) -> AsyncIterator[bytes]:
        for i in range(self.n):
            if i == self.fail_at:
                raise OSError("the store went away")
            self.read += 1
            yield b"chunk %d" % i
            await asyncio.sleep(0)


async def _as_read(chunk: bytes) -> bytes:
    return chunk


async def _let_run() -> None:
    for _ in range(50):
        await asyncio.sleep(0)


def test_items_are_pulled_ahead_while_the_caller_works():
    async def run() -> None:
        source = _Source(20)
        async with aclosing(read_ahead(source.chunks(), _as_read, 3)) as reading:
            got = [await anext(reading)]
            await _let_run()
            # The one handed over and three more pulled, waiting for their turn; no more.
            assert source.read == 4
            got += [pair async for pair in reading]
        assert got == [(b"chunk %d" % i,) * 2 for i in range(20)]

    asyncio.run(run())


def test_a_failed_pull_raises_after_the_items_before_it():
    async def run() -> None:
        got = []
        with pytest.raises(OSError, match="went away"):
            async for chunk, _ in read_ahead(_Source(10, fail_at=2).chunks(), _as_read, 3):
                got.append(chunk)
        assert got == [b"chunk 0", b"chunk 1"]

    asyncio.run(run())


def test_a_caller_that_stops_stops_the_pulling():
    async def run() -> None:
        source = _Source(100)
        async with aclosing(read_ahead(source.chunks(), _as_read, 2)) as reading:
            assert await anext(reading) == (b"chunk 0", b"chunk 0")
        read = source.read
        await _let_run()
        assert source.read == read < 100

    asyncio.run(run())
