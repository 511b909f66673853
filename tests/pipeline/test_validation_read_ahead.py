"""Validation's read-ahead of input chunks (app/pipeline/validation._ReadAhead): chunks come in
order, no more than `ahead` are read before they are asked for, a failed read raises in its turn
(after the chunks before it), and closing it stops the reading."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator

import pytest

from app.pipeline.validation import _ReadAhead


class _Source:
    def __init__(self, n: int, fail_at: int | None = None) -> None:
        self.n, self.fail_at = n, fail_at
        self.read = 0
        self.closed = False

    async def chunks(self) -> AsyncIterator[bytes]:
        try:
            for i in range(self.n):
                if i == self.fail_at:
                    raise OSError("the store went away")
                self.read += 1
                yield b"chunk %d" % i
                await asyncio.sleep(0)
        finally:
            self.closed = True


async def _let_run() -> None:
    for _ in range(50):
        await asyncio.sleep(0)


def test_chunks_come_in_order_with_a_bounded_read_ahead():
    async def run() -> None:
        source = _Source(20)
        reading = _ReadAhead(source.chunks(), 3)
        await _let_run()
        # Three queued and one more read, waiting for a place in the queue.
        assert source.read == 4
        got = [await reading.next()]
        await _let_run()
        assert source.read == 5
        while (chunk := await reading.next()) is not None:
            got.append(chunk)
        assert got == [b"chunk %d" % i for i in range(20)]
        await reading.close()

    asyncio.run(run())


def test_a_failed_read_raises_after_the_chunks_before_it():
    async def run() -> None:
        reading = _ReadAhead(_Source(10, fail_at=2).chunks(), 3)
        assert await reading.next() == b"chunk 0"
        assert await reading.next() == b"chunk 1"
        with pytest.raises(OSError, match="went away"):
            await reading.next()
        await reading.close()

    asyncio.run(run())


def test_close_stops_the_reading():
    async def run() -> None:
        source = _Source(100)
        reading = _ReadAhead(source.chunks(), 2)
        assert await reading.next() == b"chunk 0"
        await reading.close()
        read = source.read
        await _let_run()
        assert source.read == read < 100

    asyncio.run(run())
