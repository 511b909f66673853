"""Pause and resume landing on different replicas: two `batchd serve` replicas over one Postgres
database and one S3 bucket run a batch's shards side by side in front of one paced fake fleet.
The pause is sent to replica A while both hold shards of the batch; once the lines in flight
are recorded no request reaches the fleet from either replica. The resume is sent to replica B,
and the batch completes with every custom_id exactly once and every line sent to the fleet once.
A pause reaches the other replica's running shards through the database (each running shard
re-reads its batch's state every second, app/worker/shard_run.py), as a cancel does."""

from __future__ import annotations

import time

import openai
import pytest

from harness.client import openai_client
from harness.poll import wait_until
from harness.server import ServerProcess
from tests.conftest import API_KEYS_ENV
from tests.support import db
from tests.support.batches import CHAT_MODEL, chat_line, create, results_by_custom_id, wait_for
from tests.support.upstreams import paced_fleet

# Two servers in front of a fake upstream fleet, no vLLM: not in make test-fast (tests/conftest.py).
pytestmark = pytest.mark.engine

LINES = 1200
SHARD_LINES = 100
QUIET_SECONDS = 3.0  # watched for a request while paused: several of the worker's 1 s polls


def _requests(fleet) -> int:
    return fleet.stats().get("requests", 0)


def _holders(server: ServerProcess, batch_id: str) -> set[str]:
    """The replicas holding a running shard of the batch now."""
    rows = db.execute(
        server, "SELECT DISTINCT lease_owner FROM batch_shards WHERE batch_id = :id AND status = 'running'", id=batch_id
    )
    return {owner for (owner,) in rows if owner}


@pytest.mark.parametrize("backend", ["postgres-s3"], indirect=True)
def test_pause_on_one_replica_and_resume_on_another_runs_each_line_once(tmp_path, database_factory, storage_factory):
    fleet, config = paced_fleet(tmp_path, CHAT_MODEL)
    database_url, s3 = database_factory(), storage_factory()
    servers: dict[str, ServerProcess] = {}

    def start(name: str) -> openai.OpenAI:
        env = {
            "BATCHD_API_KEYS": API_KEYS_ENV,
            "BATCHD_REPLICA_ID": name,
            "BATCHD_LEASE_SECONDS": "3",
            "BATCHD_SHARD_LINES": str(SHARD_LINES),
        }
        server = ServerProcess(
            tmp_path / name, database_url, env=env, models=True, s3=s3, args=["--config", str(config)]
        )
        servers[name] = server.start()
        return openai_client(server.base_url, "key-a")

    try:
        a, b = start("replica-a"), start("replica-b")
        batch = create(a, [chat_line(f"line-{i}", f"question {i}") for i in range(LINES)])
        # Both replicas run shards of it (each runs several at once, the fleet paces them).
        wait_until(
            lambda: _holders(servers["replica-a"], batch.id) == {"replica-a", "replica-b"},
            timeout=60,
            interval=0.1,
            what="shards of the batch running on both replicas",
        )
        wait_for(a, batch.id, until=lambda x: x.request_counts.completed >= LINES * 3 // 10, timeout=60)

        paused = a.post(f"/batches/{batch.id}/pause", cast_to=object, body={})
        assert paused["status"] == "in_progress" and paused["paused_at"]
        assert b.batches.retrieve(batch.id).model_extra["paused_at"] == paused["paused_at"]

        def settled() -> bool:  # every request the fleet answered is recorded, no shard held
            counts = b.batches.retrieve(batch.id).request_counts
            return counts.completed == _requests(fleet) and not _holders(servers["replica-a"], batch.id)

        wait_until(settled, timeout=30, what="the lines in flight on both replicas recorded")
        sent = _requests(fleet)
        deadline = time.monotonic() + QUIET_SECONDS
        while time.monotonic() < deadline:  # a window in which neither replica may send a line
            assert _requests(fleet) == sent, "a line started while paused"
            time.sleep(0.2)
        for client in (a, b):
            still = client.batches.retrieve(batch.id)
            assert still.status == "in_progress" and still.model_extra["paused_at"] == paused["paused_at"]
            assert still.request_counts.completed == sent < LINES

        resumed = b.post(f"/batches/{batch.id}/resume", cast_to=object, body={})
        assert resumed["status"] == "in_progress" and resumed.get("paused_at") is None
        done = wait_for(a, batch.id, timeout=120)
        assert done.status == "completed" and done.request_counts.completed == LINES
        output, errors = results_by_custom_id(a, done)  # asserts no custom_id twice
        assert errors == {} and set(output) == {f"line-{i}" for i in range(LINES)}
        assert _requests(fleet) == LINES  # every line sent once: none ran twice across the replicas
        ran_on = db.execute(
            servers["replica-a"], "SELECT DISTINCT replica FROM batch_shards WHERE batch_id = :id", id=batch.id
        )
        assert {r for (r,) in ran_on} <= {"replica-a", "replica-b"}
    finally:
        for server in servers.values():
            server.kill()
        fleet.stop()
