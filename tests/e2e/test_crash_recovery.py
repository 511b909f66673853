"""Kill -9 harness: SIGKILL the server while a batch is validating, running and finalizing;
after each restart on the same data it carries on, and in the end every custom_id is in the
files exactly once with counts that match.

What is killed is batchd's durability, not the engine's, so the lines run on the paced fake
upstream, whose four restarts take seconds (on the in-process engine they took three minutes a
backend). Killing batchd mid-run on the real engine is covered by the replica test
(tests/e2e/test_replicas.py) and by run-batch's resume test."""

from __future__ import annotations

import openai
import pytest

from harness.client import openai_client
from harness.poll import wait_until
from harness.server import ServerProcess
from tests.conftest import API_KEYS_ENV
from tests.support.batches import CHAT_MODEL, chat_line, create, results_by_custom_id, wait_for
from tests.support.upstreams import paced_fleet

# Servers in front of fake upstream fleets, no vLLM: not in make test-fast (tests/conftest.py).
pytestmark = pytest.mark.engine

LINES = 1000
COMPLETION_TOKENS = 2  # the fake upstream's usage for every line


@pytest.fixture
def upstream(tmp_path):
    """The chat model served by the paced fake upstream (its usage reports 2 completion tokens
    a line), and the config pointing batchd at it."""
    fleet, config = paced_fleet(tmp_path, CHAT_MODEL)
    yield fleet, config
    fleet.stop()


@pytest.fixture
def restartable(tmp_path, upstream, database_factory, storage_factory):
    data_dir = tmp_path / "data"
    database_url, s3 = database_factory(), storage_factory()
    _, config = upstream
    servers: list[ServerProcess] = []

    def start(fault: str | None = None) -> ServerProcess:
        for marker in data_dir.glob("fault-*"):
            marker.unlink()
        env = {"BATCHD_API_KEYS": API_KEYS_ENV, "BATCHD_LEASE_SECONDS": "3"}
        if fault:
            env["BATCHD_TEST_FAULT"] = fault
        server = ServerProcess(data_dir, database_url, env=env, models=True, s3=s3, args=["--config", str(config)])
        servers.append(server.start())
        return server

    yield start
    for server in servers:
        server.kill()


def _wait_for_marker(server: ServerProcess, name: str, timeout: float = 120) -> None:
    wait_until(
        lambda: (server.data_dir / f"fault-{name}").exists(),
        timeout,
        lambda: f"fault point {name} (not reached):\n{server.log()[-3000:]}",
    )


def _client(server: ServerProcess) -> openai.OpenAI:
    return openai_client(server.base_url, "key-a")


def test_batch_survives_sigkill_while_validating_running_and_finalizing(restartable, upstream):
    server = restartable(fault="validating")
    client = _client(server)
    batch = create(client, [chat_line(f"line-{i}", f"question {i}", max_tokens=16) for i in range(LINES)])
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
        assert body["object"] == "chat.completion" and body["usage"]["completion_tokens"] == COMPLETION_TOKENS
    assert done.usage.output_tokens == COMPLETION_TOKENS * LINES
    assert [f.id for f in client.files.list(purpose="batch_output")] == [done.output_file_id]
    # What was in flight at the mid-run kill went out again: the upstream saw more requests
    # than lines, yet the files hold each custom_id once.
    fleet, _ = upstream
    assert fleet.stats()["requests"] > LINES
