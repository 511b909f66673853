"""Admission to one engine, shared fairly by the projects using it.

A plain semaphore is FIFO: a project that queued 10,000 lines first would hold the engine until
they were all admitted. Here each project has its own queue of waiters (earliest deadline first)
and a freed slot goes to the project app.scheduling.gate_order picks: by pass (grants per
weight), lines that go ahead (an at-risk batch; a small batch while its project has credit,
app.scheduling.credit) first up to a bound. Callers wait for a slot before they read their next
line (LineExecutor), so what waits here is a few lines per shard, not whole shards: the lines in
memory are bounded by the engine's window whatever the number of projects."""

from __future__ import annotations

import asyncio
import heapq
import itertools
import math
import time
from collections import Counter
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from dataclasses import dataclass
from typing import NamedTuple, Protocol

from app.core import metrics
from app.scheduling.credit import CREDIT_LINES, refilled
from app.scheduling.gate_order import DEFAULT_AT_RISK_MAX_SHARE, Head, at_risk_bound, capped_pass, next_project


@dataclass(frozen=True)
class Ticket:
    """Whose line asks for a slot: fairness is per project, order within it by deadline."""

    project: str = ""
    batch_id: str = ""
    deadline: float = 0.0  # the batch's deadline (its due_at when set, else its expires_at)
    single: bool = False  # a single-request lane's (flex, background response): never preempts a busy engine
    start_by: float = math.inf  # epoch seconds its line must have started by (a flex request's wait)


@dataclass(frozen=True)
class Grant:
    """A slot held: released with FairGate.release."""

    project: str
    ahead: bool  # granted ahead of fair share
    behind: bool = False  # its project has a batch due well before it running


class SharePolicy(Protocol):
    """What the gate asks the scheduler: each project's weight on a model, which batches are at
    risk, small or behind an earlier one of their project (app.scheduling.fair_share), and how
    much of the engine the lines of one project may take ahead of fair share."""

    at_risk_max_share: float

    def weight(self, model: str, project: str) -> float: ...

    def at_risk(self, batch_id: str) -> bool: ...

    def small(self, batch_id: str) -> bool: ...

    def waits_behind(self, batch_id: str) -> bool: ...

    def window_part(self, model: str) -> float: ...


class EqualShares:
    """Every project weighs the same and no batch is at risk (`batchd run-batch`, unit tests)."""

    at_risk_max_share = DEFAULT_AT_RISK_MAX_SHARE

    def weight(self, model: str, project: str) -> float:
        return 1.0

    def at_risk(self, batch_id: str) -> bool:
        return False

    def small(self, batch_id: str) -> bool:
        return False

    def waits_behind(self, batch_id: str) -> bool:
        return False

    def window_part(self, model: str) -> float:
        return 1.0


class _Waiter(NamedTuple):
    """Ordered by (deadline, order): `order` is unique, so the ticket and future are never
    compared (a tuple compares in C; a dataclass's generated __lt__ was a Python call a step
    of every heap push and pop)."""

    deadline: float
    order: int
    ticket: Ticket
    future: asyncio.Future


class FairGate:
    def __init__(self, capacity: int, name: str = "", policy: SharePolicy | None = None) -> None:
        self.capacity = max(1, capacity)
        self.name = name  # the model: its weights, and the lines-waiting metric
        self.policy: SharePolicy = policy or EqualShares()
        self._free = self.capacity
        self._queues: dict[str, list[_Waiter]] = {}  # project -> its waiters, earliest deadline first
        self._held: Counter[str] = Counter()  # slots held per project
        self._held_ahead: Counter[str] = Counter()  # of which granted ahead of fair share
        self._credit: dict[str, tuple[float, float]] = {}  # project -> small-batch credit, as of when
        # A project back from idle starts at the last pass granted (gate_order).
        self._pass: dict[str, float] = {}
        self._clock = 0.0
        self._order = itertools.count()

    def load(self) -> tuple[int, int]:
        """(slots held, tickets queued for one): read-only, for status pages."""
        return self.capacity - self._free, sum(len(queue) for queue in self._queues.values())

    @asynccontextmanager
    async def slot(self, ticket: Ticket) -> AsyncIterator[None]:
        grant = await self.acquire(ticket)
        try:
            yield
        finally:
            self.release(grant)

    def _limit(self) -> int:
        """Slots this gate may hold now: all, or the part of them the policy gives this replica
        of a fleet every replica shares (fair_share.local_weights)."""
        return max(1, round(self.capacity * self.policy.window_part(self.name)))

    def try_acquire(self, ticket: Ticket) -> Grant | None:
        """A slot at once if one is free and nobody waits for it, else None."""
        if self._free > 0 and not self._queues and self.capacity - self._free < self._limit():
            self._free -= 1
            return self._take(ticket)
        return None

    async def acquire(self, ticket: Ticket) -> Grant:
        grant = self.try_acquire(ticket)
        if grant is not None:
            return grant
        future: asyncio.Future[Grant] = asyncio.get_running_loop().create_future()
        waiter = _Waiter(ticket.deadline, next(self._order), ticket, future)
        if ticket.project not in self._queues:
            self._pass[ticket.project] = max(self._pass.get(ticket.project, 0.0), self._clock)
        heapq.heappush(self._queues.setdefault(ticket.project, []), waiter)
        metrics.line_waiting(self.name, +1)
        try:
            return await future
        except asyncio.CancelledError:
            if future.done() and not future.cancelled():
                self.release(future.result())  # the slot was handed over just as we were cancelled
            else:
                self._forget(waiter)
            raise
        finally:
            metrics.line_waiting(self.name, -1)

    def release(self, grant: Grant) -> None:
        self._drop(self._held, grant.project)
        if grant.ahead:
            self._drop(self._held_ahead, grant.project)
        self._free += 1
        # Usually the freed slot passes straight on; more go when the limit was raised meanwhile.
        limit = self._limit()
        while self._queues and self._free > 0 and self.capacity - self._free < limit:
            project = self._next_project()
            queue = self._queues[project]
            waiter = heapq.heappop(queue)
            if not queue:
                del self._queues[project]
            if waiter.future.done():
                continue
            self._free -= 1
            grant = self._take(waiter.ticket)
            self._clock = self._pass[project]
            if not grant.ahead:  # a slot ahead of fair share is not paid back in later turns
                self._pass[project] += 1.0 / max(self.policy.weight(self.name, project), 1e-9)
            waiter.future.set_result(grant)

    def _goes_ahead(self, ticket: Ticket, now: float) -> bool:
        return self.policy.at_risk(ticket.batch_id) or self._on_credit(ticket, now)

    def _on_credit(self, ticket: Ticket, now: float) -> bool:
        """A small batch's line, with small-batch credit left for its project."""
        return self.policy.small(ticket.batch_id) and self._credit_of(ticket.project, now) >= 1

    def _credit_of(self, project: str, now: float) -> float:
        credit, since = self._credit.get(project, (CREDIT_LINES, now))
        return refilled(credit, since, now)

    def _take(self, ticket: Ticket) -> Grant:
        now = time.monotonic()
        at_risk = self.policy.at_risk(ticket.batch_id)
        on_credit = not at_risk and self._on_credit(ticket, now)
        if on_credit:
            self._credit[ticket.project] = (self._credit_of(ticket.project, now) - 1, now)
        ahead = at_risk or on_credit
        self._held[ticket.project] += 1
        if ahead:
            self._held_ahead[ticket.project] += 1
        return Grant(ticket.project, ahead, not ahead and self.policy.waits_behind(ticket.batch_id))

    @staticmethod
    def _drop(counter: Counter[str], project: str) -> None:
        counter[project] -= 1
        if counter[project] <= 0:
            del counter[project]

    def _forget(self, waiter: _Waiter) -> None:
        project = waiter.ticket.project
        queue = self._queues.get(project)
        if queue is not None and waiter in queue:
            queue.remove(waiter)
            heapq.heapify(queue)
            if not queue:
                del self._queues[project]

    def _refresh_pass(self, project: str) -> float:
        """Bring a waiting project's pass up to the clock (capped for its weight); its weight."""
        weight = self.policy.weight(self.name, project)
        self._pass[project] = capped_pass(self._pass.get(project, self._clock), self._clock, weight)
        return weight

    def _next_project(self) -> str:
        if len(self._queues) == 1:  # the usual case: what the rule below picks, without its lists
            project = next(iter(self._queues))
            self._refresh_pass(project)
            return project
        now = time.monotonic()
        heads = [
            Head(project, queue[0].deadline, self._goes_ahead(queue[0].ticket, now))
            for project, queue in self._queues.items()
        ]
        weights = {project: self._refresh_pass(project) for project in self._queues}
        bound = at_risk_bound(self.capacity, self.policy.at_risk_max_share)
        return next_project(heads, self._held, self._held_ahead, weights, self._pass, bound)
