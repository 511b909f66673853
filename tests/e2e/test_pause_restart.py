"""A paused batch survives SIGKILL: pause a served batch mid-run, kill -9 the server once the
lines in flight are recorded, restart it on the same data: the batch is still paused (no request
reaches the upstream), and resumed it completes with every line sent exactly once."""

from __future__ import annotations

import time

import openai
import pytest

from harness.client import openai_client
from harness.poll import wait_until
from harness.server import ServerProcess
from tests.conftest import API_KEYS_ENV
from tests.support.batches import CHAT_MODEL, chat_line, create, results_by_custom_id, wait_for
from tests.support.upstreams import paced_fleet

# A server in front of a fake upstream fleet, no vLLM: not in make test-fast (tests/conftest.py).
pytestmark = pytest.mark.engine

LINES = 600
QUIET_SECONDS = 3.0  # watched for a request while paused: several of the worker's 1 s polls


def _requests(fleet) -> int:
    return fleet.stats().get("requests", 0)


def test_a_batch_paused_then_sigkilled_stays_paused_and_resumes_each_line_once(
    tmp_path, database_factory, storage_factory
):
    fleet, config = paced_fleet(tmp_path, CHAT_MODEL)
    data_dir, database_url, s3 = tmp_path / "data", database_factory(), storage_factory()
    env = {"BATCHD_API_KEYS": API_KEYS_ENV, "BATCHD_LEASE_SECONDS": "3", "BATCHD_SHARD_LINES": "100"}
    servers: list[ServerProcess] = []

    def start() -> openai.OpenAI:
        server = ServerProcess(data_dir, database_url, env=env, models=True, s3=s3, args=["--config", str(config)])
        servers.append(server.start())
        return openai_client(server.base_url, "key-a")

    try:
        client = start()
        batch = create(client, [chat_line(f"line-{i}", f"question {i}") for i in range(LINES)])
        wait_for(client, batch.id, until=lambda b: b.request_counts.completed >= LINES // 5, timeout=60)
        paused = client.post(f"/batches/{batch.id}/pause", cast_to=object, body={})
        assert paused["status"] == "in_progress" and paused["paused_at"]

        def settled() -> bool:  # every request the upstream answered is recorded
            return client.batches.retrieve(batch.id).request_counts.completed == _requests(fleet)

        wait_until(settled, timeout=30, what="the lines in flight recorded")
        servers[-1].kill()

        client = start()
        sent = _requests(fleet)
        deadline = time.monotonic() + QUIET_SECONDS
        while time.monotonic() < deadline:  # a window in which nothing may be sent
            assert _requests(fleet) == sent, "a line started while paused"
            time.sleep(0.2)
        still = client.batches.retrieve(batch.id)
        assert still.status == "in_progress" and still.model_extra["paused_at"] == paused["paused_at"]
        assert still.request_counts.completed == sent < LINES

        client.post(f"/batches/{batch.id}/resume", cast_to=object, body={})
        done = wait_for(client, batch.id, timeout=120)
        assert done.status == "completed" and done.request_counts.completed == LINES
        output, errors = results_by_custom_id(client, done)  # asserts no custom_id twice
        assert errors == {} and set(output) == {f"line-{i}" for i in range(LINES)}
        assert _requests(fleet) == LINES  # nothing was in flight at the kill: each line sent once
    finally:
        for server in servers:
            server.kill()
        fleet.stop()
