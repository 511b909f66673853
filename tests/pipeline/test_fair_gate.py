"""The engine gate hands freed slots to projects by weight, earliest deadline first within one,
and to an at-risk batch before anyone."""

import asyncio
from collections import Counter

from app.pipeline.fair_gate import FairGate, Ticket


class Policy:
    at_risk_max_share = 0.5

    def __init__(self, weights=None, at_risk=(), window_part=1.0) -> None:
        self.weights = weights or {}
        self.at_risk_ids = set(at_risk)
        self.part = window_part

    def weight(self, model: str, project: str) -> float:
        return self.weights.get(project, 1)

    def at_risk(self, batch_id: str) -> bool:
        return batch_id in self.at_risk_ids

    def small(self, batch_id: str) -> bool:
        return batch_id.startswith("small")

    def waits_behind(self, batch_id: str) -> bool:
        return False

    def window_part(self, model: str) -> float:
        return self.part


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


def test_a_small_batch_goes_ahead_on_its_projects_credit_then_at_its_share():
    # Project s queues 150 lines of small batches behind b's 150: the first 100 (its credit) go
    # ahead of b's, the rest alternate with b's at fair share.
    tickets = [Ticket("b", "big", 100.0)] * 150 + [Ticket("s", f"small{n // 50}", 100.0) for n in range(150)]
    order = [t.project for t in _admission_order(FairGate(1, policy=Policy()), tickets)]
    assert order[:100] == ["s"] * 100
    assert order[100:110] == ["b", "s"] * 5


def test_a_weight_that_dipped_for_one_grant_does_not_starve_the_project_after():
    """Weights are re-read as shards move between replicas; a slot granted while a project's
    weight was tiny must not hold that project back once its weight is back."""
    policy = Policy({"b": 1e-6})
    tickets = [Ticket("a", "a0", 100.0)] * 10 + [Ticket("b", "b0", 100.0)] * 10

    async def scenario() -> list[str]:
        gate = FairGate(1, policy=policy)
        grant = await gate.acquire(Ticket("blocker"))
        waiters = {asyncio.create_task(gate.acquire(t)): t for t in tickets}
        await asyncio.sleep(0)
        order: list[str] = []
        for _ in tickets:
            gate.release(grant)
            await asyncio.sleep(0)
            (task,) = [t for t in waiters if t.done()]
            grant = task.result()
            order.append(waiters.pop(task).project)
            if order[-1] == "b":
                policy.weights["b"] = 1
        gate.release(grant)
        return order

    order = asyncio.run(scenario())
    first_b = order.index("b")
    assert order[first_b + 1 : first_b + 5].count("b") == 2, order


def test_a_replica_given_part_of_a_shared_fleet_holds_only_that_part_of_its_window():
    async def scenario() -> list[tuple[int, int]]:
        policy = Policy(window_part=0.25)
        gate = FairGate(8, policy=policy)  # a quarter: 2 slots
        first = await gate.acquire(Ticket("a", "a0"))
        done = asyncio.Event()

        async def line() -> None:
            async with gate.slot(Ticket("b", "b0")):
                await done.wait()

        tasks = [asyncio.create_task(line()) for _ in range(7)]
        await asyncio.sleep(0)
        quarter = gate.load()  # (slots held, lines waiting)
        policy.part = 1.0  # its whole window again: the next release lets every waiter in
        gate.release(first)
        whole = gate.load()
        done.set()
        await asyncio.gather(*tasks)
        return [quarter, whole, gate.load()]

    assert asyncio.run(scenario()) == [(2, 6), (7, 0), (0, 0)]
