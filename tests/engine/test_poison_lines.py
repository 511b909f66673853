"""A poison line cannot kill a model: a fake engine core that dies whenever a marked line is in
flight (as a request that crashes vLLM would), behind the real supervisor, in the app through
the `openai` client. The marked line fails with `engine_crashed` after its second death; every
other line of its batch and of another project's batch, in flight beside it or not, completes
exactly once; `/health` says when the backed-off restart comes, the quarantined line is
counted, and the model serves again without a restart of batchd."""

from __future__ import annotations

import asyncio
from collections import Counter
from collections.abc import Coroutine
from typing import Any

import pytest

from app.core.statuses import EngineState
from app.engine.errors import EngineDeadError
from app.engine.poison import Suspects
from app.engine.results import LineResult
from app.engine.supervision import EngineSupervisor, RestartPolicy
from harness.health import ADMIN_ENV, ADMIN_HEADERS
from harness.poll import wait_until
from tests.conftest import API_KEYS_ENV
from tests.support.batches import CHAT_MODEL, chat_line, create, results_by_custom_id, wait_for
from tests.support.fake_engine import FakeEngines, prompt_of
from tests.support.metrics import scrape, value

POISON = "fake:poison"


class QuickBurstSlowBackoff(RestartPolicy):
    """One quick restart (the burst), then a backed-off one long enough for /health to be read
    meanwhile on a loaded host (the policy's own doubling gave it 0.2 s, which a poll can miss)."""

    def backoff(self, restart: int) -> float:
        return self.backoff_seconds if restart <= self.max_restarts else self.max_backoff_seconds


POLICY = QuickBurstSlowBackoff(max_restarts=1, window_seconds=600, backoff_seconds=0.1, max_backoff_seconds=8.0)
# A line takes this long on the core, so that several are in flight when the marked one arrives.
LINE_SECONDS = 0.05


class Core:
    """One engine core: answers lines after LINE_SECONDS, and dies when a marked line arrives,
    taking every line in flight with it (each raises EngineDeadError, as vLLM's do)."""

    def __init__(self) -> None:
        self.errored = False
        self.killed = 0  # lines other than the marked one that were in flight at its death
        self._dead = asyncio.Event()

    def exit_cause(self) -> str:
        return "was killed by SIGSEGV"

    async def run(self, body: dict[str, Any], answer: Coroutine[Any, Any, LineResult]) -> LineResult:
        if POISON in prompt_of(body):
            self.errored = True
            self._dead.set()
        if self.errored:
            answer.close()
            raise EngineDeadError(CHAT_MODEL)
        try:
            await asyncio.wait_for(self._dead.wait(), LINE_SECONDS)
        except TimeoutError:
            return await answer
        answer.close()
        self.killed += 1
        raise EngineDeadError(CHAT_MODEL)


class PoisonableEngines(FakeEngines):
    """The fake engines, the chat model's lines on a supervised Core (made on the app's loop)."""

    def __init__(self) -> None:
        super().__init__()
        self.cores: list[Core] = []
        self.supervisor: EngineSupervisor[Core] | None = None
        self.answered: Counter[str] = Counter()  # by the line's prompt: each line's successes

    def _supervised(self) -> EngineSupervisor[Core]:
        if self.supervisor is None:
            self.supervisor = EngineSupervisor(CHAT_MODEL, self._core(), POLICY, self._start, self._stop)
        return self.supervisor

    def _core(self) -> Core:
        self.cores.append(Core())
        return self.cores[-1]

    async def _start(self) -> Core:
        return self._core()

    async def _stop(self, core: Core) -> None:
        return None

    @property
    def ready(self) -> bool:  # type: ignore[override]
        return self.supervisor is None or self.supervisor.serving

    def engine_problems(self) -> dict[str, str]:
        problem = self.supervisor.problem if self.supervisor is not None else None
        return {CHAT_MODEL: problem} if problem else {}

    def engine_state(self, model: str) -> EngineState:
        if model == CHAT_MODEL and not self.ready:
            return EngineState.DEAD
        return super().engine_state(model)

    async def execute(self, endpoint: str, body: Any, request_id: str, priority: int = 0, **kwargs: Any) -> LineResult:
        if not isinstance(body, dict) or body.get("model") != CHAT_MODEL:
            return await super().execute(endpoint, body, request_id, priority, **kwargs)
        parent = super().execute
        result = await self._supervised().run(lambda core: core.run(body, parent(endpoint, body, request_id, priority)))
        self.answered[prompt_of(body)] += 1
        return result

    async def shutdown(self) -> None:
        if self.supervisor is not None:
            await self.supervisor.close()
        await super().shutdown()


@pytest.fixture(scope="module")
def poison_server(start_app):
    engines = PoisonableEngines()
    return start_app({"BATCHD_API_KEYS": API_KEYS_ENV, **ADMIN_ENV}, engines), engines


def _quarantined(server) -> float:
    return value(scrape(server), "batchd_lines_quarantined_total", model=CHAT_MODEL)


def test_a_poison_line_fails_with_engine_crashed_and_every_other_line_completes_once(poison_server):
    server, engines = poison_server
    client_a, client_b = server.client("key-a"), server.client("key-b")
    quarantined_before = _quarantined(server)
    other = create(client_b, [chat_line(f"b-{i}", f"b question {i}") for i in range(40)])
    lines = [chat_line(f"a-{i}", POISON if i == 7 else f"a question {i}") for i in range(30)]
    batch = create(client_a, lines)

    # The second death is past the burst: the restart backs off, and /health says until when.
    def backing_off() -> dict | None:
        health = server.http.get("/health", headers=ADMIN_HEADERS)
        reason = health.json().get("engines", {}).get(CHAT_MODEL, "")
        return health.json() if health.status_code == 503 and "backing off" in reason else None

    health = wait_until(backing_off, 120, "/health to report the backed-off restart")
    reason = health["engines"][CHAT_MODEL]
    assert reason.startswith("its engine died 2 times within 600 s (more than BATCHD_ENGINE_MAX_RESTARTS=1"), reason
    assert "; backing off: next restart at 20" in reason, reason

    done, other_done = wait_for(client_a, batch.id, timeout=60), wait_for(client_b, other.id, timeout=60)

    # Two deaths (the marked line's first run and its one run again), two restarts; other lines
    # were in flight at the first (they ran again one at a time, not beside the marked line).
    assert len(engines.cores) == 3, len(engines.cores)
    assert engines.cores[0].killed >= 1
    assert done.status == "completed" and (done.request_counts.completed, done.request_counts.failed) == (29, 1)
    output, errors = results_by_custom_id(client_a, done)
    assert set(output) == {f"a-{i}" for i in range(30) if i != 7} and set(errors) == {"a-7"}
    assert errors["a-7"]["response"] is None
    assert errors["a-7"]["error"]["code"] == "engine_crashed", errors["a-7"]
    assert other_done.status == "completed" and other_done.request_counts.completed == 40
    other_output, other_errors = results_by_custom_id(client_b, other_done)
    assert other_errors == {} and len(other_output) == 40
    # Exactly once each: the lines in flight beside the marked one ran again, once, and it never
    # ran after its second death.
    assert all(count == 1 for count in engines.answered.values()), engines.answered.most_common(3)
    assert len(engines.answered) == 29 + 40 and POISON not in engines.answered
    assert _quarantined(server) - quarantined_before == 1

    # The model serves again, with no restart of batchd.
    assert server.http.get("/health").status_code == 200
    again = wait_for(client_a, create(client_a, [chat_line(f"c-{i}", f"c question {i}") for i in range(5)]).id)
    assert again.status == "completed" and again.request_counts.completed == 5
    assert len(engines.cores) == 3


def test_suspects_are_counted_once_per_death_cleared_when_they_run_through_and_bounded():
    suspects = Suspects("m", max_records=3)
    assert suspects.record(("b", 1), 1) == 1 and suspects.record(("b", 1), 1) == 1  # one death, two calls
    assert suspects.record(("b", 2), 1) == 1 and suspects.waiting == 2
    suspects.clear(("b", 2))
    assert not suspects.suspected(("b", 2)) and suspects.waiting == 1
    assert suspects.record(("b", 1), 2) == 2 and suspects.quarantined(("b", 1)) and suspects.waiting == 0
    for line in range(3, 7):
        suspects.record(("b", line), 3)
    # The oldest records went first (a suspect whose batch was cancelled never comes back).
    assert not suspects.quarantined(("b", 1)) and suspects.waiting == 3
