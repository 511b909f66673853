"""The registry's engines on demand with fake engines in place of vLLM's (no engine starts):
with engines that can sleep, a swapped-out engine sleeps (an on-demand one from the start) and
wakes for its lines with a test generation, a failed wake restarts it; with engines that
cannot (CPU), swaps shut them down and start them again. Every line runs once."""

from __future__ import annotations

import asyncio
from http import HTTPStatus

import pytest

from app.core.endpoints import EMBEDDINGS
from app.engine.config.specs import ModelSpec
from app.engine.local import registry as registry_module
from app.engine.local.registry import EngineRegistry
from app.scheduling.residency import Urgency


class FakeEngine:
    """What the registry uses of a ModelEngine, with sleep and wake."""

    def __init__(self, spec: ModelSpec, sleep_mode: bool, log: list[str]) -> None:
        self.spec, self.log = spec, log
        self.can_sleep = sleep_mode  # as vLLM's sleep mode where it works (CUDA)
        self.endpoints = frozenset({EMBEDDINGS})
        self.max_num_seqs = 4
        self.errored = False
        self.asleep = False
        self.fail_wake = False
        self.stopped = False

    @property
    def name(self) -> str:
        return self.spec.name

    async def run(self, endpoint, body, priority=0):
        assert not self.asleep and not self.stopped, f"a line ran on {self.name}'s engine asleep or stopped"
        await asyncio.sleep(0.001)
        return HTTPStatus.OK, {"object": "list", "data": [], "model": self.name, "input": body.get("input")}

    async def sleep(self) -> None:
        self.asleep = True
        self.log.append(f"sleep {self.name}")

    async def wake(self) -> None:
        self.log.append(f"wake {self.name}")
        if self.fail_wake:
            raise RuntimeError("wake failed")
        self.asleep = False

    async def probe(self) -> None:
        self.log.append(f"probe {self.name}")
        status, _ = await self.run(EMBEDDINGS, {"input": "ping"})
        assert status == HTTPStatus.OK

    async def unload(self) -> None:
        self.stopped = True
        self.log.append(f"stop {self.name}")

    def shutdown(self) -> None:
        self.stopped = True

    def count_prompt_tokens(self, endpoint, bodies):
        return [1 for _ in bodies]


class _Heap:
    def settle(self) -> None:
        pass

    def restore(self) -> None:
        pass


def launch_without_processes(monkeypatch, start_model_engine) -> None:
    """The registry starts its engines with `start_model_engine` and touches no process: no
    pinning, no priorities, no engine cores to find, reap or wait for."""
    monkeypatch.setattr(registry_module.launch, "start_model_engine", start_model_engine)
    for name in ("pin_off_worker_cpus", "unpin", "lower_engine_priority", "release_leftovers"):
        monkeypatch.setattr(registry_module, name, lambda *args, **kwargs: None)
    monkeypatch.setattr(registry_module, "engine_processes", lambda *args, **kwargs: [])
    monkeypatch.setattr(registry_module, "engine_shared_objects", lambda *args, **kwargs: None)
    monkeypatch.setattr(registry_module, "wait_for_exit", lambda *args, **kwargs: None)


@pytest.fixture
def fake_launch(monkeypatch):
    log: list[str] = []
    engines: dict[str, list[FakeEngine]] = {}

    async def start_model_engine(spec, *, engines_in_process=1, sleep_mode=False):
        engine = FakeEngine(spec, sleep_mode and fake_launch.can_sleep, log)
        engines.setdefault(spec.name, []).append(engine)
        log.append(f"start {spec.name}")
        return engine

    launch_without_processes(monkeypatch, start_model_engine)
    fake_launch.can_sleep = True
    fake_launch.log, fake_launch.engines = log, engines
    return fake_launch


def _scenario(fake_launch, rounds, before_round=None):
    async def scenario():
        registry = EngineRegistry(max_resident=1, min_residency_seconds=0.05)
        registry._heap = _Heap()
        await registry.start([ModelSpec(name="a", path="/a"), ModelSpec(name="b", path="/b")])
        ran: list[tuple[str, int]] = []
        try:
            for number, (model, count) in enumerate(rounds):
                if before_round is not None:
                    before_round(number)

                async def line(n: int, model: str = model, number: int = number) -> None:
                    body = {"model": model, "input": f"{model}-{n}"}
                    result = await registry.execute(EMBEDDINGS, body, f"req-{model}-{number}-{n}", urgency=Urgency())
                    assert result.status_code == 200 and result.body["input"] == f"{model}-{n}"
                    ran.append((model, n))

                await asyncio.wait_for(asyncio.gather(*(line(n) for n in range(count))), 20)
        finally:
            await registry.shutdown()
        return ran

    ran = asyncio.run(scenario())
    assert sorted(ran) == sorted((model, n) for model, count in rounds for n in range(count))  # each once


def test_engines_that_can_sleep_sleep_when_swapped_out_and_wake_with_a_test_generation(fake_launch):
    _scenario(fake_launch, [("b", 12), ("a", 12), ("b", 12)])
    # At start: the on-demand one (over the budget) first, put to sleep, then the one that stays.
    assert fake_launch.log[:3] == ["start b", "sleep b", "start a"]
    assert fake_launch.log[3:] == [
        "sleep a",
        "wake b",
        "probe b",
        "sleep b",
        "wake a",
        "probe a",
        "sleep a",
        "wake b",
        "probe b",
    ]
    assert {name: len(started) for name, started in fake_launch.engines.items()} == {"a": 1, "b": 1}  # no restart


def test_a_failed_wake_restarts_the_engine_and_its_lines_run_once(fake_launch):
    def break_b_wake(number: int) -> None:
        if number == 0:
            fake_launch.engines["b"][0].fail_wake = True

    _scenario(fake_launch, [("b", 12), ("a", 12)], before_round=break_b_wake)
    swaps = fake_launch.log[3:]
    assert swaps[:3] == ["sleep a", "wake b", "stop b"] and swaps[3] == "start b", swaps
    assert len(fake_launch.engines["b"]) == 2  # a fresh engine for b


def test_engines_that_cannot_sleep_are_stopped_and_started_again(fake_launch):
    fake_launch.can_sleep = False  # CPU
    _scenario(fake_launch, [("b", 12), ("a", 12)])
    assert fake_launch.log == ["start b", "stop b", "start a", "stop a", "start b", "stop b", "start a"]
