"""The engine gate hands freed slots to projects by weight, earliest deadline first within one,
and to an at-risk batch before anyone."""

import asyncio
from collections import Counter

from app.pipeline.fair_gate import FairGate, Ticket


class Policy:
    def __init__(self, weights=None, at_risk=()) -> None:
        self.weights = weights or {}
        self.risky = set(at_risk)

    def weight(self, project: str) -> float:
        return self.weights.get(project, 1)

    def at_risk(self, batch_id: str) -> bool:
        return batch_id in self.risky


def _admission_order(gate: FairGate, tickets: list[Ticket]) -> list[Ticket]:
    """Queue `tickets` in order while the gate is full, then free it: the order slots go in."""

    async def scenario() -> list[Ticket]:
        order: list[Ticket] = []
        release = asyncio.Event()

        async def line(ticket: Ticket) -> None:
            async with gate.slot(ticket):
                order.append(ticket)
                await release.wait()

        blockers = [asyncio.create_task(line(Ticket("blocker"))) for _ in range(gate.capacity)]
        await asyncio.sleep(0)
        tasks = [asyncio.create_task(line(ticket)) for ticket in tickets]
        await asyncio.sleep(0)
        release.set()
        await asyncio.gather(*blockers, *tasks)
        return order[gate.capacity :]

    return asyncio.run(scenario())


def test_a_project_with_many_batches_gets_one_share():
    # Project a queues six lines from each of three batches before project b queues six.
    tickets = [Ticket("a", f"a{n}", 100.0) for n in range(3) for _ in range(6)] + [Ticket("b", "b0", 100.0)] * 6
    order = [t.project for t in _admission_order(FairGate(1), tickets)]
    assert order[:12] == ["a", "b"] * 6


def test_slots_follow_the_weights():
    tickets = [Ticket("a", "a0")] * 30 + [Ticket("b", "b0")] * 30
    order = [t.project for t in _admission_order(FairGate(1, policy=Policy({"a": 2})), tickets)]
    assert Counter(order[:30]) == {"a": 20, "b": 10}


def test_the_earliest_deadline_goes_first_within_a_project():
    tickets = [Ticket("a", "day", 86_400.0)] * 3 + [Ticket("a", "hour", 3_600.0)] * 3
    order = [t.batch_id for t in _admission_order(FairGate(1), tickets)]
    assert order == ["hour"] * 3 + ["day"] * 3


def test_an_at_risk_batch_goes_ahead_of_fair_share():
    tickets = [Ticket("a", "a0", 100.0)] * 4 + [Ticket("b", "late", 50.0)] * 4
    order = [t.batch_id for t in _admission_order(FairGate(1, policy=Policy(at_risk={"late"})), tickets)]
    assert order == ["late"] * 4 + ["a0"] * 4


def test_a_project_back_from_idle_has_no_credit_saved_up():
    async def scenario() -> list[str]:
        gate = FairGate(1)
        order: list[str] = []

        async def line(project: str) -> None:
            async with gate.slot(Ticket(project)):
                order.append(project)
                await asyncio.sleep(0)

        await asyncio.gather(*(line("a") for _ in range(20)))  # a alone: b stays idle
        order.clear()
        await asyncio.gather(*(line("a") for _ in range(10)), *(line("b") for _ in range(10)))
        return order

    order = asyncio.run(scenario())
    assert Counter(order[:10]) == {"a": 5, "b": 5}, order


def test_a_cancelled_waiter_gives_back_nothing_and_blocks_nobody():
    async def scenario() -> int:
        gate = FairGate(1)
        hold = asyncio.Event()

        async def holder():
            async with gate.slot(Ticket("a")):
                await hold.wait()

        first = asyncio.create_task(holder())
        await asyncio.sleep(0)
        waiter = asyncio.create_task(holder())
        await asyncio.sleep(0)
        waiter.cancel()
        hold.set()
        await first
        await asyncio.gather(waiter, return_exceptions=True)
        async with gate.slot(Ticket("b")):
            pass
        return gate._free

    assert asyncio.run(scenario()) == 1
