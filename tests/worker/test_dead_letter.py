"""The dead letter (issue #54): a batch whose work fails every time ends `failed` after
BATCHD_MAX_STEP_FAILURES attempts, its errors saying why, instead of being retried every
BATCHD_RETRY_BACKOFF_SECONDS forever; an engine that cannot run lines is not the batch's fault
and is retried as before. On the app in process with the fake engine, on SQLite and Postgres."""

from __future__ import annotations

import asyncio

import pytest

from app.domains.batches import validation
from app.engine.errors import EngineDeadError
from app.worker import runner, shard_run
from harness.poll import wait_until
from tests.conftest import API_KEYS_ENV
from tests.support.batches import chat_line, create, wait_for
from tests.support.fake_engine import FakeEngines

ATTEMPTS = 3


@pytest.fixture(scope="module")
def failing_server(start_app):
    env = {
        "BATCHD_API_KEYS": API_KEYS_ENV,
        "BATCHD_MAX_STEP_FAILURES": str(ATTEMPTS),
        "BATCHD_RETRY_BACKOFF_SECONDS": "0.05",
    }
    return start_app(env, engines=FakeEngines())


def _always_failing(monkeypatch, module, name: str, error: Exception) -> list[int]:
    """Make `module.name` raise `error` at every call; the list of calls made so far."""
    calls: list[int] = []

    async def fail(*args, **kwargs):
        calls.append(1)
        raise error

    monkeypatch.setattr(module, name, fail)
    return calls


@pytest.mark.parametrize(
    ("module", "name", "step"),
    [(validation, "validate_input_file", "validation"), (shard_run.ShardRun, "_run_lines", "run")],
    ids=["validation", "shard"],
)
def test_a_step_failing_every_time_fails_the_batch_with_a_reason(failing_server, monkeypatch, module, name, step):
    calls = _always_failing(monkeypatch, module, name, RuntimeError("a bug the batch keeps hitting"))
    ending = runner.dead_letter

    async def slow_dead_letter(*args, **kwargs):
        await asyncio.sleep(1.5)  # a slow write (CI on Postgres), past a claim poll: no claim runs the work meanwhile
        return await ending(*args, **kwargs)

    monkeypatch.setattr(runner, "dead_letter", slow_dead_letter)
    client = failing_server.client("key-a")
    batch = wait_for(client, create(client, [chat_line("a"), chat_line("b")]).id, timeout=60)
    assert batch.status == "failed" and batch.failed_at is not None
    assert len(calls) == ATTEMPTS
    (error,) = batch.errors.data
    assert error.code == "processing_failed"
    assert f"{step} failed {ATTEMPTS} times in a row (RuntimeError)" in error.message
    assert "a bug the batch keeps hitting" not in error.message  # details stay in the server's log


def test_an_engine_that_cannot_run_lines_is_retried_not_counted(failing_server, monkeypatch):
    calls = _always_failing(monkeypatch, shard_run.ShardRun, "_run_lines", EngineDeadError("the engine died"))
    client = failing_server.client("key-a")
    batch = create(client, [chat_line("a")])
    wait_until(lambda: len(calls) >= ATTEMPTS + 2, timeout=60, what="the shard's attempts")
    assert client.batches.retrieve(batch.id).status == "in_progress"
    monkeypatch.undo()  # the engine is back: the batch runs
    assert wait_for(client, batch.id, timeout=60).status == "completed"
