"""The sleep path of engines on demand with a fake engine that implements sleep and wake (no
vLLM, CPU): a swapped-out engine sleeps, wakes for its work with a test generation, a failed
wake (or an engine that does not answer) falls back to a restart, an engine that cannot sleep
is shut down as before, and every line runs once."""

from __future__ import annotations

import asyncio

from app.engine.local.residency import Residency
from app.engine.local.sleep import SleepOrRestart
from app.scheduling.residency import Urgency

DAY = Urgency(deadline=86_400.0)


class FakeEngines:
    """Engines by model: `running` (awake, serving), `sleeping`; what happened, in order."""

    def __init__(self, running: set[str], sleepers: set[str]) -> None:
        self.running = set(running)
        self.sleeping: set[str] = set()
        self.sleepers = sleepers  # the models whose engine can sleep
        self.events: list[str] = []
        self.fail_wake: set[str] = set()  # the next wake of these raises
        self.hang_probe: set[str] = set()  # the next test generation of these never answers
        self.ran: list[tuple[str, int]] = []
        self.most_awake = len(running)

    async def start(self, model: str) -> None:
        await asyncio.sleep(0.01)
        self.running.add(model)
        self.most_awake = max(self.most_awake, len(self.running))
        self.events.append(f"start {model}")

    async def stop(self, model: str) -> None:
        await asyncio.sleep(0.01)
        self.running.discard(model)
        self.sleeping.discard(model)
        self.events.append(f"stop {model}")

    async def sleep(self, model: str) -> None:
        assert model in self.running
        self.running.discard(model)
        self.sleeping.add(model)
        self.events.append(f"sleep {model}")

    async def wake(self, model: str) -> None:
        assert model in self.sleeping
        self.events.append(f"wake {model}")
        if model in self.fail_wake:
            self.fail_wake.discard(model)
            raise RuntimeError("CUDA error: out of memory")
        self.sleeping.discard(model)
        self.running.add(model)
        self.most_awake = max(self.most_awake, len(self.running))

    async def probe(self, model: str) -> None:
        self.events.append(f"probe {model}")
        if model in self.hang_probe:
            self.hang_probe.discard(model)
            await asyncio.Event().wait()
        assert model in self.running

    def swaps(self) -> SleepOrRestart:
        return SleepOrRestart(
            start=self.start,
            stop=self.stop,
            sleep=self.sleep,
            wake=self.wake,
            probe=self.probe,
            can_sleep=self.sleepers.__contains__,
            probe_seconds=0.2,
        )


async def _rounds(engines: FakeEngines, residency: Residency, rounds: list[tuple[str, int]]) -> None:
    """Each round, `count` lines of `model` (four at a time), after the round before has ended."""
    for model, count in rounds:

        async def line(number: int, model: str = model) -> None:
            async with residency.use(model, DAY):
                assert model in engines.running, f"{model} line {number} ran with no engine awake"
                await asyncio.sleep(0.002)
                engines.ran.append((model, number))

        await asyncio.gather(*(line(n) for n in range(count)))


def _run(engines: FakeEngines, rounds: list[tuple[str, int]]) -> None:
    async def scenario():
        swaps = engines.swaps()
        residency = Residency({"a": True, "b": True}, 1, 0.05, swaps.load, swaps.unload)
        residency.start(sorted(engines.running))
        try:
            await asyncio.wait_for(_rounds(engines, residency, rounds), 20)
        finally:
            await residency.close()

    asyncio.run(scenario())


def _each_once(engines: FakeEngines, rounds: list[tuple[str, int]]) -> None:
    expected = sorted((model, n) for model, count in rounds for n in range(count))
    assert sorted(engines.ran) == expected  # every line once (per round)


def test_a_swapped_out_engine_sleeps_and_wakes_for_its_work_with_a_test_generation():
    engines = FakeEngines({"a"}, sleepers={"a", "b"})
    rounds = [("b", 20), ("a", 20), ("b", 20)]
    _run(engines, rounds)
    assert engines.events == [
        "sleep a",  # a gives way to b: it sleeps, not shut down
        "start b",  # b never ran: a full start
        "sleep b",
        "wake a",  # a's work: woken, then a test generation before its lines
        "probe a",
        "sleep a",
        "wake b",
        "probe b",
    ]
    assert engines.most_awake == 1
    _each_once(engines, rounds)


def test_a_failed_wake_falls_back_to_a_restart_and_every_line_runs_once():
    engines = FakeEngines({"a"}, sleepers={"a", "b"})
    engines.fail_wake.add("a")
    rounds = [("b", 20), ("a", 20)]
    _run(engines, rounds)
    assert engines.events == ["sleep a", "start b", "sleep b", "wake a", "stop a", "start a"]
    assert engines.most_awake == 1
    _each_once(engines, rounds)


def test_a_woken_engine_that_does_not_answer_its_test_generation_is_restarted():
    engines = FakeEngines({"a"}, sleepers={"a", "b"})
    engines.hang_probe.add("a")
    rounds = [("b", 8), ("a", 8)]
    _run(engines, rounds)
    assert engines.events == ["sleep a", "start b", "sleep b", "wake a", "probe a", "stop a", "start a"]
    _each_once(engines, rounds)


def test_an_engine_that_cannot_sleep_is_shut_down_and_started_again_as_before():
    engines = FakeEngines({"a"}, sleepers=set())  # CPU: no sleep mode
    rounds = [("b", 10), ("a", 10)]
    _run(engines, rounds)
    assert engines.events == ["stop a", "start b", "stop b", "start a"]
    _each_once(engines, rounds)
