"""Kill -9 harness: SIGKILL the server while a batch is validating, running and finalizing;
after each restart on the same data it carries on, and in the end every custom_id is in the
files exactly once with counts that match.

What is killed is batchd's durability, not the engine's, so only SQLite runs the lines on the
real in-process engine (four engine starts, about three minutes); Postgres + S3 runs them on the
fake upstream, whose restarts take seconds."""

from __future__ import annotations

import time
from dataclasses import dataclass

import openai
import pytest

from tests.conftest import API_KEYS_ENV
from tests.support.batches import CHAT_MODEL, chat_line, create, results_by_custom_id, wait_for
from tests.support.engines import eager_config
from tests.support.server import ServerProcess
from tests.support.upstreams import paced_fleet

LINES = 1000
MAX_TOKENS = 16


@dataclass
class Served:
    args: list[str]
    completion_tokens: int  # what each line's usage reports


@pytest.fixture
def served(tmp_path, backend):
    """The chat model: the real engine on SQLite, the paced fake upstream (2 completion tokens
    a line) on Postgres + S3."""
    if backend == "sqlite":
        config = eager_config(tmp_path / "models.json", {CHAT_MODEL: {}})
        yield Served(["--model", CHAT_MODEL, "--config", str(config)], MAX_TOKENS)
        return
    fleet, config = paced_fleet(tmp_path, CHAT_MODEL)
    yield Served(["--config", str(config)], 2)
    fleet.stop()


@pytest.fixture
def restartable(tmp_path, served, database_factory, storage_factory):
    data_dir = tmp_path / "data"
    database_url, s3 = database_factory(), storage_factory()
    servers: list[ServerProcess] = []

    def start(fault: str | None = None) -> ServerProcess:
        for marker in data_dir.glob("fault-*"):
            marker.unlink()
        env = {"BATCHD_API_KEYS": API_KEYS_ENV, "BATCHD_LEASE_SECONDS": "3"}
        if fault:
            env["BATCHD_TEST_FAULT"] = fault
        server = ServerProcess(data_dir, database_url, env=env, models=True, s3=s3, args=served.args)
        servers.append(server.start())
        return server

    yield start
    for server in servers:
        server.kill()


def _wait_for_marker(server: ServerProcess, name: str, timeout: float = 120) -> None:
    deadline = time.monotonic() + timeout
    while not (server.data_dir / f"fault-{name}").exists():
        assert time.monotonic() < deadline, f"fault point {name} not reached:\n{server.log()[-3000:]}"
        time.sleep(0.1)


def _client(server: ServerProcess) -> openai.OpenAI:
    return openai.OpenAI(base_url=server.base_url, api_key="key-a", max_retries=0)


def test_batch_survives_sigkill_while_validating_running_and_finalizing(restartable, served):
    server = restartable(fault="validating")
    client = _client(server)
    batch = create(client, [chat_line(f"line-{i}", f"question {i}", max_tokens=MAX_TOKENS) for i in range(LINES)])
    _wait_for_marker(server, "validating")
    server.kill()

    server = restartable(fault="finalizing")
    client = _client(server)
    mid = wait_for(client, batch.id, until=lambda b: b.request_counts.completed >= LINES // 5)
    server.kill()
    assert mid.status == "in_progress" and mid.request_counts.completed < LINES

    server = restartable(fault="finalizing")
    client = _client(server)
    _wait_for_marker(server, "finalizing", timeout=300)
    assert client.batches.retrieve(batch.id).status == "finalizing"
    server.kill()

    server = restartable()
    client = _client(server)
    done = wait_for(client, batch.id, timeout=300)
    assert done.status == "completed"
    counts = done.request_counts
    assert (counts.total, counts.completed, counts.failed) == (LINES, LINES, 0)
    output, errors = results_by_custom_id(client, done)  # asserts no custom_id twice
    assert errors == {} and set(output) == {f"line-{i}" for i in range(LINES)}
    for line in output.values():
        assert line["response"]["status_code"] == 200
        body = line["response"]["body"]
        assert body["object"] == "chat.completion" and body["usage"]["completion_tokens"] == served.completion_tokens
    assert done.usage.output_tokens == served.completion_tokens * LINES
    assert [f.id for f in client.files.list(purpose="batch_output")] == [done.output_file_id]
