"""Admission to one engine, shared fairly by the projects using it.

A plain semaphore is FIFO: a project that queued 10,000 lines first would hold the engine until
they were all admitted. Here each project has its own queue and a freed slot goes to the
waiting project that holds the fewest slots for its weight, so while several projects have
lines waiting each holds slots (and, lines costing alike, gets lines/s) in proportion to its
weight, and an idle project's slots go to the others at once. Counting held slots rather than
past grants keeps a project whose queue ran dry for a moment (a shard ending) from losing its
turn, without letting it bank credit while idle. Within a project the earliest deadline goes
first. A batch the policy says is at risk of missing its deadline goes ahead of every project's
share until it is not."""

from __future__ import annotations

import asyncio
import heapq
import itertools
from collections import Counter
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from dataclasses import dataclass, field
from typing import Protocol

from app.core import metrics


@dataclass(frozen=True)
class Ticket:
    """Whose line asks for a slot: fairness is per project, order within it by deadline."""

    project: str = ""
    batch_id: str = ""
    deadline: float = 0.0  # the batch's expires_at


class SharePolicy(Protocol):
    """What the gate asks the scheduler: each project's weight and which batches are at risk."""

    def weight(self, project: str) -> float: ...

    def at_risk(self, batch_id: str) -> bool: ...


class EqualShares:
    """Every project weighs the same and no batch is at risk (`batchd run-batch`, unit tests)."""

    def weight(self, project: str) -> float:
        return 1.0

    def at_risk(self, batch_id: str) -> bool:
        return False


@dataclass(order=True)
class _Waiter:
    deadline: float
    order: int
    ticket: Ticket = field(compare=False)
    future: asyncio.Future = field(compare=False)


class FairGate:
    def __init__(self, capacity: int, name: str = "", policy: SharePolicy | None = None) -> None:
        self.capacity = max(1, capacity)
        self.name = name  # the model, for the lines-waiting metric
        self.policy: SharePolicy = policy or EqualShares()
        self._free = self.capacity
        self._queues: dict[str, list[_Waiter]] = {}  # project -> its waiters, earliest deadline first
        self._held: Counter[str] = Counter()  # slots held per project
        # Ties on held slots (always, at capacity 1) go round by weight: each grant advances the
        # project's pass by 1/weight; a project back from idle starts at the last pass granted.
        self._pass: dict[str, float] = {}
        self._clock = 0.0
        self._order = itertools.count()

    def load(self) -> tuple[int, int]:
        """(lines holding a slot, lines queued for one): read-only, for status pages."""
        return self.capacity - self._free, sum(len(queue) for queue in self._queues.values())

    @asynccontextmanager
    async def slot(self, ticket: Ticket) -> AsyncIterator[None]:
        await self._acquire(ticket)
        try:
            yield
        finally:
            self._release(ticket.project)

    async def _acquire(self, ticket: Ticket) -> None:
        if self._free > 0 and not self._queues:
            self._free -= 1
            self._held[ticket.project] += 1
            return
        future = asyncio.get_running_loop().create_future()
        waiter = _Waiter(ticket.deadline, next(self._order), ticket, future)
        if ticket.project not in self._queues:
            self._pass[ticket.project] = max(self._pass.get(ticket.project, 0.0), self._clock)
        heapq.heappush(self._queues.setdefault(ticket.project, []), waiter)
        try:
            with metrics.line_waiting(self.name):
                await future
        except asyncio.CancelledError:
            if future.done() and not future.cancelled():
                self._release(ticket.project)  # the slot was handed over just as we were cancelled
            else:
                self._forget(waiter)
            raise

    def _forget(self, waiter: _Waiter) -> None:
        project = waiter.ticket.project
        queue = self._queues.get(project)
        if queue is not None and waiter in queue:
            queue.remove(waiter)
            heapq.heapify(queue)
            if not queue:
                del self._queues[project]

    def _next_project(self) -> str:
        """The project whose head waiter goes next: an at-risk batch's, else the fairest."""
        at_risk = [
            (queue[0].deadline, project)
            for project, queue in self._queues.items()
            if self.policy.at_risk(queue[0].ticket.batch_id)
        ]
        if at_risk:
            return min(at_risk)[1]
        return min(
            self._queues,
            key=lambda p: (self._held[p] / max(self.policy.weight(p), 1e-9), self._pass[p]),
        )

    def _release(self, project: str) -> None:
        self._held[project] -= 1
        if not self._held[project]:
            del self._held[project]
        while self._queues:
            project = self._next_project()
            queue = self._queues[project]
            waiter = heapq.heappop(queue)
            if not queue:
                del self._queues[project]
            if waiter.future.done():
                continue
            self._held[project] += 1
            self._clock = self._pass[project]
            self._pass[project] += 1.0 / max(self.policy.weight(project), 1e-9)
            waiter.future.set_result(None)  # the slot passes straight to the waiter
            return
        self._free += 1
