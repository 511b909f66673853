"""Engine supervision with fake engines (no vLLM): a dead engine is restarted with backoff and
its lines run again on the new one; after too many deaths within the window the restarts back
off (`/health` says until when) but never stop. (A line that keeps killing its engine:
tests/engine/test_poison_lines.py.)"""

from __future__ import annotations

import asyncio
import itertools
from contextlib import asynccontextmanager

import httpx

from app.core import metrics
from app.core.config import Settings
from app.engine.boot import NoModels
from app.engine.errors import EngineDeadError
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

    async def execute(self, endpoint, body, request_id, priority=0, urgency=None) -> LineResult:
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


def test_after_too_many_deaths_it_backs_off_health_says_when_and_it_serves_again(tmp_path, monkeypatch):
    """Engines that die at their first line, four in a row, then a healthy one: the first death
    and one restart are the burst (`max_restarts` 1); the deaths after it back off, each wait
    twice the one before, and `/health` says until when. Lines are never given up: each line in
    flight at two deaths is quarantined (`engine_crashed`), and once an engine lives, the rest run."""
    policy = RestartPolicy(max_restarts=1, window_seconds=600, backoff_seconds=0.05, max_backoff_seconds=0.2)

    async def scenario():
        fleet = Fleet(lives=0)
        supervisor = EngineSupervisor(MODEL, fleet.started[0], policy, fleet.start, fleet.stop)
        engines = FakeEngines(supervisor)
        async with _server(tmp_path, monkeypatch, engines) as client:
            run = asyncio.create_task(_run_lines(engines, 20))
            await asyncio.wait_for(_until(lambda: supervisor.state is Supervision.BACKING_OFF), 10)
            # Why an engine is down, and until when, is a detail of /health for admin keys.
            health = await client.get("/health", headers={"Authorization": "Bearer key-admin"})
            await asyncio.wait_for(_until(lambda: len(fleet.started) >= 5), 10)
            fleet.lives = 1_000  # whatever killed them is gone: the next engine lives
            outcomes = await asyncio.wait_for(run, 20)
            after = await client.get("/health")
        await supervisor.close()
        return fleet, outcomes, health, after

    fleet, outcomes, health, after = asyncio.run(scenario())

    assert [o.line_no for o in outcomes] == list(range(1, 21))
    crashed = [o for o in outcomes if not o.ok]
    assert crashed and all(o.record["error"]["code"] == "engine_crashed" for o in crashed)
    assert all(o.record["response"]["body"]["line"] == o.line_no for o in outcomes if o.ok)
    assert len(crashed) < 20  # the lines in flight at one death only ran again
    assert health.status_code == 503
    body = health.json()
    assert body["status"] == "engine unavailable"
    reason = body["engines"][MODEL]
    assert reason.startswith("its engine died 2 times within 600 s (more than BATCHD_ENGINE_MAX_RESTARTS=1"), reason
    assert "backing off: next restart at 20" in reason, reason
    assert after.status_code == 200 and supervisor_serves(fleet)


def supervisor_serves(fleet: Fleet) -> bool:
    return not fleet.started[-1].errored and not fleet.started[-1].stopped


def test_backoff_doubles_up_to_a_minute_in_the_burst_and_to_its_cap_after():
    policy = RestartPolicy(max_restarts=10, window_seconds=600, backoff_seconds=1.5, max_backoff_seconds=300)
    assert [policy.backoff(n) for n in (1, 2, 3, 7, 10)] == [1.5, 3.0, 6.0, 60.0, 60.0]
    # Past the burst it keeps doubling, to the cap (BATCHD_ENGINE_RESTART_MAX_BACKOFF_SECONDS).
    assert [policy.backoff(n) for n in (11, 12, 1000)] == [300.0, 300.0, 300.0]
    short = RestartPolicy(max_restarts=3, window_seconds=600, backoff_seconds=1.0, max_backoff_seconds=300)
    assert [short.backoff(n) for n in (1, 2, 3, 4, 5, 8, 9, 10)] == [1, 2, 4, 8, 16, 128, 256, 300]
