"""Engines on demand under a memory budget (`--engine-memory-budget`, #58) with the registry and
two fake engines in place of vLLM's (no engine starts; CPU path: a swapped-out engine stops).

`a` (4 GiB) is loaded and busy, its lines held; `b` (4 GiB, on demand) gets lines. With a budget
that fits both, `b` loads and serves while `a` still drains; with one that fits one (or a count
limit of one beside a large budget), `b` waits for `a` to finish and be unloaded. The engines
alive, and their summed memory, never exceed the budget; every line runs once."""

from __future__ import annotations

import asyncio
from http import HTTPStatus

import pytest

from app.core.endpoints import EMBEDDINGS
from app.engine.config.specs import ModelSpec
from app.engine.errors import ModelConfigError
from app.engine.local.registry import EngineRegistry
from app.scheduling.residency import Urgency
from tests.engine.local.test_registry_sleep import FakeEngine, _Heap, launch_without_processes

GIB = 1 << 30
NEEDS = {"a": 4 * GIB, "b": 4 * GIB}
LINES = 4


class Alive:
    """The fake engines alive (from the start of their load to their unload), what happened in
    order, the most alive at once and the most memory they took together; `gates` hold a
    model's lines until set."""

    def __init__(self) -> None:
        self.models: set[str] = set()
        self.events: list[str] = []
        self.most = 0
        self.most_memory = 0
        self.gates = {"a": asyncio.Event(), "b": asyncio.Event()}
        self.gates["b"].set()
        self.running = {"a": 0, "b": 0}  # lines on the engine now, past its gate or waiting at it

    def up(self, model: str) -> None:
        self.models.add(model)
        self.most = max(self.most, len(self.models))
        self.most_memory = max(self.most_memory, sum(NEEDS[m] for m in self.models))

    def gone(self, model: str) -> None:
        self.models.discard(model)

    def index_after(self, event: str, start: int) -> int:
        return self.events.index(event, start)


class GatedEngine(FakeEngine):
    def __init__(self, spec: ModelSpec, alive: Alive) -> None:
        super().__init__(spec, False, alive.events)
        self.alive = alive

    async def run(self, endpoint, body, priority=0):
        self.alive.running[self.name] += 1
        try:
            await self.alive.gates[self.name].wait()
            return await super().run(endpoint, body, priority)
        finally:
            self.alive.running[self.name] -= 1
            self.alive.events.append(f"line {self.name} done")

    async def unload(self) -> None:
        await super().unload()
        self.alive.gone(self.name)

    def shutdown(self) -> None:
        super().shutdown()
        self.alive.gone(self.name)


@pytest.fixture
def alive(monkeypatch):
    alive = Alive()

    async def start_model_engine(spec, *, engines_in_process=1, sleep_mode=False):
        alive.events.append(f"load {spec.name} begins")
        alive.up(spec.name)  # its memory is taken as its load begins
        await asyncio.sleep(0.01)  # a load takes a little while
        alive.events.append(f"load {spec.name} done")
        return GatedEngine(spec, alive)

    launch_without_processes(monkeypatch, start_model_engine)
    return alive


def _specs() -> list[ModelSpec]:
    return [
        ModelSpec(name="a", path="/a", memory_gib=4),
        ModelSpec(name="b", path="/b", memory_gib=4, load="on-demand"),
    ]


async def _until(condition, what: str) -> None:
    async def poll() -> None:
        while not condition():
            await asyncio.sleep(0.001)

    try:
        await asyncio.wait_for(poll(), 10)
    except TimeoutError:
        raise AssertionError(f"timed out waiting for {what}") from None


def _scenario(alive: Alive, memory_budget: int, max_resident: int | None, overlap: bool) -> int:
    """Run a's lines (held) and b's; return where the events after start begin."""

    async def scenario() -> int:
        registry = EngineRegistry(max_resident=max_resident, min_residency_seconds=0.05, memory_budget=memory_budget)
        registry._heap = _Heap()
        await registry.start(_specs())
        start = len(alive.events)
        ran: list[str] = []

        async def line(model: str, n: int) -> None:
            body = {"model": model, "input": f"{model}-{n}"}
            result = await registry.execute(EMBEDDINGS, body, f"req-{model}-{n}", urgency=Urgency())
            assert result.status_code == HTTPStatus.OK and result.body["input"] == f"{model}-{n}"
            ran.append(body["input"])

        try:
            a_lines = [asyncio.create_task(line("a", n)) for n in range(LINES)]
            await _until(lambda: alive.running["a"] == LINES, "a's lines on its engine")
            b_lines = asyncio.gather(*(line("b", n) for n in range(LINES)))
            if overlap:
                # b loads and serves all its lines while a's are still in flight (a drains).
                await asyncio.wait_for(b_lines, 10)
                assert alive.running["a"] == LINES
            else:
                assert registry._residency is not None
                await _until(
                    lambda: any(d.model == "b" and d.waiting == LINES for d in registry._residency.demands()),
                    "b's lines waiting",
                )
            alive.gates["a"].set()
            await asyncio.wait_for(asyncio.gather(*a_lines, b_lines), 10)
        finally:
            await registry.shutdown()
        assert sorted(ran) == sorted(f"{m}-{n}" for m in "ab" for n in range(LINES))  # each once
        return start

    return asyncio.run(scenario())


def test_with_a_budget_that_fits_both_the_second_loads_while_the_first_drains(alive):
    start = _scenario(alive, 8 * GIB, None, overlap=True)
    # At start b is started once (its endpoints learnt) and stopped before a starts.
    assert alive.events[:start] == ["load b begins", "load b done", "stop b", "load a begins", "load a done"]
    b_load = alive.index_after("load b begins", start)
    last_a_line = max(n for n, event in enumerate(alive.events) if event == "line a done")
    assert b_load < last_a_line  # b's load began before a's drain ended
    assert "stop a" not in alive.events  # nothing had to give way
    assert alive.most == 2 and alive.most_memory <= 8 * GIB


@pytest.mark.parametrize(
    ("memory_budget", "max_resident"),
    [(6 * GIB, None), (64 * GIB, 1)],
    ids=["a-budget-that-fits-one", "a-count-limit-of-one-beside-a-large-budget"],
)
def test_without_room_for_both_the_second_loads_only_once_the_first_is_unloaded(alive, memory_budget, max_resident):
    start = _scenario(alive, memory_budget, max_resident, overlap=False)
    last_a_line = max(n for n, event in enumerate(alive.events) if event == "line a done")
    stop_a = alive.index_after("stop a", start)
    b_load = alive.index_after("load b begins", start)
    assert last_a_line < stop_a < b_load  # a drained and was unloaded, then b loaded
    assert alive.most == 1 and alive.most_memory <= min(memory_budget, 4 * GIB)


def test_a_model_needing_more_than_the_budget_is_refused_before_any_engine_starts(alive):
    async def scenario() -> None:
        registry = EngineRegistry(memory_budget=3 * GIB)
        registry._heap = _Heap()
        await registry.start(_specs())

    with pytest.raises(ModelConfigError, match="more than the engine memory budget"):
        asyncio.run(scenario())
    assert alive.events == []
