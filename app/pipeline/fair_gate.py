"""Admission to one engine, shared fairly by the batches using it.

A plain semaphore is FIFO: a batch that queued 10,000 lines first would hold the engine until
they were all admitted. Here each batch has its own queue and a freed slot goes to the next
batch in round-robin order, so concurrent batches progress at the same rate."""

from __future__ import annotations

import asyncio
from collections import OrderedDict, deque
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager

from app.core import metrics


class FairGate:
    def __init__(self, capacity: int, name: str = "") -> None:
        self.capacity = max(1, capacity)
        self.name = name  # the model, for the lines-waiting metric
        self._free = self.capacity
        self._waiting: OrderedDict[str, deque[asyncio.Future]] = OrderedDict()

    def load(self) -> tuple[int, int]:
        """(lines holding a slot, lines queued for one): read-only, for status pages."""
        return self.capacity - self._free, sum(len(queue) for queue in self._waiting.values())

    @asynccontextmanager
    async def slot(self, key: str) -> AsyncIterator[None]:
        await self._acquire(key)
        try:
            yield
        finally:
            self._release()

    async def _acquire(self, key: str) -> None:
        if self._free > 0 and not self._waiting:
            self._free -= 1
            return
        future = asyncio.get_running_loop().create_future()
        self._waiting.setdefault(key, deque()).append(future)
        try:
            with metrics.line_waiting(self.name):
                await future
        except asyncio.CancelledError:
            if future.done() and not future.cancelled():
                self._release()  # the slot was handed over just as we were cancelled
            else:
                self._forget(key, future)
            raise

    def _forget(self, key: str, future: asyncio.Future) -> None:
        queue = self._waiting.get(key)
        if queue is not None:
            try:
                queue.remove(future)
            except ValueError:
                pass
            if not queue:
                del self._waiting[key]

    def _release(self) -> None:
        while self._waiting:
            key, queue = self._waiting.popitem(last=False)
            future = queue.popleft()
            if queue:
                self._waiting[key] = queue  # back of the round
            if not future.done():
                future.set_result(None)  # the slot passes straight to the waiter
                return
        self._free += 1
