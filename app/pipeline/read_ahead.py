"""Reading ahead: the next items' reads run while the caller works on the current one (validation's
input chunks, finalize's shards of checkpoint chunks), bounded so memory stays flat."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncGenerator, AsyncIterator, Awaitable, Callable
from typing import TypeVar

T = TypeVar("T")
R = TypeVar("R")


async def read_ahead(
    items: AsyncIterator[T], read: Callable[[T], Awaitable[R]], ahead: int
) -> AsyncGenerator[tuple[T, R], None]:
    """(item, await read(item)) for every item, in the items' order. A task pulls the items and
    starts their reads while the caller works: `ahead` beyond the one handed over, `ahead + 1`
    while the caller waits (so at most that many reads at once, and as many results held). A
    failed pull or read raises in its turn; when the caller stops, the pulling stops and reads
    still going are cancelled."""
    handed: asyncio.Queue[asyncio.Future[tuple[T, R]] | None] = asyncio.Queue()  # None: the end
    slots = asyncio.Semaphore(ahead + 1)

    async def pair(item: T) -> tuple[T, R]:
        return item, await read(item)

    async def pull() -> None:
        try:
            while True:
                await slots.acquire()  # a place first: an item is pulled only when it may be read
                try:
                    item = await anext(items)
                except StopAsyncIteration:
                    return
                handed.put_nowait(asyncio.ensure_future(pair(item)))
        except Exception as exc:  # noqa: BLE001 - raised where its item is asked for
            failed: asyncio.Future[tuple[T, R]] = asyncio.get_running_loop().create_future()
            failed.set_exception(exc)
            handed.put_nowait(failed)
        finally:
            handed.put_nowait(None)

    pulling = asyncio.ensure_future(pull())
    try:
        while (reading := await handed.get()) is not None:
            yield await reading
            slots.release()  # asked for the next: the one handed over is done with
    finally:
        pulling.cancel()
        left: list[asyncio.Future] = [pulling]
        left += filter(None, (handed.get_nowait() for _ in range(handed.qsize())))
        for task in left:
            task.cancel()
        # Their outcomes taken, so a failed read is not reported as never retrieved.
        await asyncio.gather(*left, return_exceptions=True)
