"""Engine supervision with fake engines (no vLLM): a dead engine is restarted with backoff and
its lines run again on the new one; after too many deaths within the window it is given up, its
lines fail with `engine_unavailable` (an error line, not a response) and `/health` says why."""

from __future__ import annotations

import asyncio
import itertools
from contextlib import asynccontextmanager

import httpx
import pytest

from app.core import metrics
from app.core.config import Settings
from app.engine.boot import NoModels
from app.engine.errors import EngineDeadError, EngineUnavailableError
from app.engine.results import LineResult
from app.engine.supervision import EngineSupervisor, RestartPolicy, Supervision
from app.http import app as http_app
from app.pipeline.executor import LineExecutor
from app.pipeline.lines import InputLine

MODEL = "fake-chat"
CHAT = "/v1/chat/completions"
FAST = RestartPolicy(max_restarts=3, window_seconds=600, backoff_seconds=0.01)


class FakeEngine:
    """Answers lines until it has run `lives` of them, then is dead (as a killed core leaves it)."""

    numbers = itertools.count(1)

    def __init__(self, lives: int) -> None:
        self.number = next(self.numbers)
        self.lives = lives
        self.errored = False
        self.stopped = False

    def exit_cause(self) -> str:
        return "was killed by SIGKILL"

    async def run(self, line: int) -> LineResult:
        await asyncio.sleep(0)
        if self.errored or self.lives == 0:
            self.errored = True
            raise EngineDeadError(MODEL)
        self.lives -= 1
        return LineResult(200, {"line": line, "engine": self.number})


class Fleet:
    """What the supervisor starts: engines with `lives` lines each (the first one included)."""

    def __init__(self, lives: int) -> None:
        self.lives = lives
        self.started: list[FakeEngine] = [FakeEngine(lives)]

    async def start(self) -> FakeEngine:
        self.started.append(FakeEngine(self.lives))
        return self.started[-1]

    async def stop(self, engine: FakeEngine) -> None:
        engine.stopped = True


class FakeEngines(NoModels):
    """A server's engines serving MODEL through the supervisor."""

    def __init__(self, supervisor: EngineSupervisor[FakeEngine]) -> None:
        self.supervisor = supervisor

    @property
    def ready(self) -> bool:  # type: ignore[override]
        return self.supervisor.serving

    def engine_problems(self) -> dict[str, str]:
        return {MODEL: self.supervisor.problem} if self.supervisor.problem else {}

    async def execute(self, endpoint, body, request_id, priority=0) -> LineResult:
        return await self.supervisor.run(lambda engine: engine.run(body["line"]))


async def _lines(n: int):
    for i in range(n):
        yield InputLine(i + 1, f"c{i}", CHAT, {"model": MODEL, "line": i + 1})


async def _run_lines(engines: FakeEngines, n: int) -> list:
    outcomes: list = []

    async def record(outcome) -> None:
        outcomes.append(outcome)

    assert await LineExecutor(engines, window=4).run(_lines(n), record, asyncio.Event())
    return sorted(outcomes, key=lambda o: o.line_no)


def _restarts() -> float:
    return metrics.ENGINE_RESTARTS.labels(MODEL)._value.get()


def test_a_dead_engine_is_restarted_and_its_lines_run_again_once_each():
    async def scenario():
        fleet = Fleet(lives=30)
        supervisor = EngineSupervisor(MODEL, fleet.started[0], FAST, fleet.start, fleet.stop)
        try:
            outcomes = await _run_lines(FakeEngines(supervisor), 100)
        finally:
            await supervisor.close()
        return fleet, outcomes

    restarts_before = _restarts()
    fleet, outcomes = asyncio.run(scenario())

    # 100 lines on engines of 30 lines each: three deaths, three restarts, every line once.
    assert [o.line_no for o in outcomes] == list(range(1, 101))
    assert all(o.ok and o.record["response"]["body"]["line"] == o.line_no for o in outcomes)
    assert len(fleet.started) == 4 and [e.stopped for e in fleet.started] == [True, True, True, False]
    assert {o.record["response"]["body"]["engine"] for o in outcomes} == {e.number for e in fleet.started}
    assert _restarts() - restarts_before == 3


def test_an_idle_engine_that_dies_is_restarted_and_not_ready_meanwhile():
    async def scenario():
        fleet = Fleet(lives=10)
        gate = asyncio.Event()

        async def slow_start() -> FakeEngine:
            await gate.wait()
            return await fleet.start()

        supervisor = EngineSupervisor(MODEL, fleet.started[0], FAST, slow_start, fleet.stop)
        engines = FakeEngines(supervisor)
        fleet.started[0].errored = True  # the core died with no line in flight
        try:
            await asyncio.wait_for(_until(lambda: supervisor.state is Supervision.RESTARTING), 5)
            states = [(engines.ready, supervisor.problem)]
            gate.set()
            await asyncio.wait_for(_until(lambda: supervisor.serving), 5)
            states.append((engines.ready, supervisor.problem))
        finally:
            await supervisor.close()
        return states

    assert asyncio.run(scenario()) == [(False, "its engine is restarting"), (True, None)]


async def _until(condition) -> None:
    while not condition():
        await asyncio.sleep(0.01)


@asynccontextmanager
async def _server(tmp_path, monkeypatch, engines):
    """batchd in process (create_app with its lifespan) serving `engines`."""

    async def start_registry(settings):
        return engines

    monkeypatch.setattr(http_app, "start_registry", start_registry)
    app = http_app.create_app(Settings(data_dir=tmp_path, api_keys="key-a=proj-a", admin_keys="key-admin"))
    async with app.router.lifespan_context(app):
        transport = httpx.ASGITransport(app=app)
        async with httpx.AsyncClient(transport=transport, base_url="http://127.0.0.1") as client:
            await asyncio.wait_for(_until(lambda: app.state.runtime.ready), 10)
            yield client


def test_after_too_many_deaths_it_gives_up_lines_fail_with_a_code_and_health_says_why(tmp_path, monkeypatch):
    """Engines that die at their first line: the first death and three restarts (the policy's
    most within the window) are all it gets; the fourth death gives it up."""

    async def scenario():
        fleet = Fleet(lives=0)
        supervisor = EngineSupervisor(MODEL, fleet.started[0], FAST, fleet.start, fleet.stop)
        engines = FakeEngines(supervisor)
        async with _server(tmp_path, monkeypatch, engines) as client:
            outcomes = await _run_lines(engines, 20)
            # Why an engine is down is a detail of /health for admin keys.
            health = await client.get("/health", headers={"Authorization": "Bearer key-admin"})
            with pytest.raises(EngineUnavailableError):
                await supervisor.wait_serving()
        await supervisor.close()
        return fleet, outcomes, health

    fleet, outcomes, health = asyncio.run(scenario())

    assert len(fleet.started) == 4 and all(e.stopped for e in fleet.started)
    assert [o.line_no for o in outcomes] == list(range(1, 21)) and not any(o.ok for o in outcomes)
    for outcome in outcomes:
        assert outcome.record["response"] is None
        assert outcome.record["custom_id"] == f"c{outcome.line_no - 1}"
        assert outcome.record["error"]["code"] == "engine_unavailable"
        assert "died 4 times within 600 s" in outcome.record["error"]["message"]
    assert health.status_code == 503
    body = health.json()
    assert body["status"] == "engine unavailable"
    assert body["engines"][MODEL].startswith("its engine died 4 times within 600 s (at most 3 restarts")


def test_backoff_doubles_up_to_a_minute():
    policy = RestartPolicy(max_restarts=10, window_seconds=600, backoff_seconds=1.5)
    assert [policy.backoff(n) for n in (1, 2, 3, 7, 10)] == [1.5, 3.0, 6.0, 60.0, 60.0]
