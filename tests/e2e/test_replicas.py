"""Scale-out: three `batchd serve` replicas (separate data dirs) over one Postgres database and
one blob store share a batch's shards. Replica-b runs its own vLLM engine; a and c send their
lines to the session's `vllm serve` (one engine start instead of three: three at once took more
than five minutes on a slow host). A cancel through any replica stops all of them; a replica
sent SIGTERM gives its shards back at once; one killed mid-run loses them when their leases
expire and the others resume them (killed alone, as a supervisor killing only the main pid does:
its vLLM engine core and worker die with it, tests/support/orphans.py). The tests run in this
order on one cluster (engines start once): the drained and the killed replica are not restarted."""

from __future__ import annotations

import os
import signal
import threading
import time
from collections import Counter

import openai
import pytest

from harness import postgres
from harness.client import anthropic_client, openai_client
from harness.poll import wait_until
from harness.server import ServerProcess
from tests.conftest import API_KEYS_ENV
from tests.support import db, vllm_upstreams
from tests.support.batches import CHAT_MODEL, chat_line, create, results_by_custom_id, wait_for
from tests.support.engines import eager_config
from tests.support.orphans import kill_alone_and_assert_no_orphans

vllm_upstreams.register(__file__)

NAMES = ("replica-a", "replica-b", "replica-c")
ENGINE_REPLICA = "replica-b"  # the one killed mid-run: its engine processes must die with it
LEASE_SECONDS = 3
SHARD_LINES = 250


class Cluster:
    def __init__(self, tmp_path_factory, database_url: str, storage_env: dict[str, str], chat_url: str) -> None:
        self.tmp = tmp_path_factory
        self.database_url = database_url
        self.storage_env = storage_env
        self.chat_url = chat_url
        self.config = eager_config(
            tmp_path_factory.mktemp("replica-config") / "models.json", {CHAT_MODEL: {"kv_cache_gib": 1}}
        )
        self.replicas: dict[str, ServerProcess] = {}

    def start(self, name: str) -> ServerProcess:
        env = {
            "BATCHD_API_KEYS": API_KEYS_ENV,
            "BATCHD_REPLICA_ID": name,
            "BATCHD_LEASE_SECONDS": str(LEASE_SECONDS),
            "BATCHD_SHARD_LINES": str(SHARD_LINES),
            "BATCHD_ENGINE_CPU_AFFINITY": "off",
            **self.storage_env,
        }
        server = ServerProcess(
            self.tmp.mktemp(name),
            self.database_url,
            env=env,
            models=True,
            args=(
                ["--model", CHAT_MODEL, "--config", str(self.config)]
                if name == ENGINE_REPLICA
                else ["--model", f"{CHAT_MODEL}={self.chat_url}"]
            ),
        )
        self.replicas[name] = server.start(timeout=600)
        return server

    def start_all(self, names=NAMES) -> None:
        threads = [threading.Thread(target=self.start, args=(name,)) for name in names]
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join()
        missing = [n for n in names if n not in self.replicas or self.replicas[n].proc.poll() is not None]
        assert not missing, f"replicas failed to start: {missing}"

    def client(self, name: str) -> openai.OpenAI:
        return openai_client(self.replicas[name].base_url, "key-a", max_retries=2)

    def shards(self, batch_id: str) -> list[tuple]:
        return db.execute(
            self.replicas[NAMES[0]],
            "SELECT shard_no, status, lease_owner, replica, lines_done "
            "FROM batch_shards WHERE batch_id = :b ORDER BY shard_no",
            b=batch_id,
        )

    def running(self, batch_id: str) -> Counter:
        """Live leases per replica."""
        return Counter(owner for _, status, owner, _, _ in self.shards(batch_id) if status == "running" and owner)

    def stop(self) -> None:
        for server in self.replicas.values():
            server.kill()


@pytest.fixture(scope="module")
def cluster(tmp_path_factory, replica_storage_env, vllm_servers):
    database_url = postgres.create_database()
    cluster = Cluster(tmp_path_factory, database_url, replica_storage_env, vllm_servers[0].url)
    try:
        cluster.start_all()
        yield cluster
    finally:
        cluster.stop()
        postgres.drop_database(database_url)


def _lines(n: int, prefix: str) -> list[dict]:
    return [chat_line(f"{prefix}-{i}", f"question {i} of {prefix}", max_tokens=4) for i in range(n)]


def _assert_complete(client: openai.OpenAI, batch, n: int, prefix: str) -> None:
    assert batch.status == "completed", batch
    counts = batch.request_counts
    assert (counts.total, counts.completed, counts.failed) == (n, n, 0)
    output, errors = results_by_custom_id(client, batch)  # asserts no custom_id twice
    assert errors == {} and set(output) == {f"{prefix}-{i}" for i in range(n)}
    for line in output.values():
        assert line["response"]["status_code"] == 200
        body = line["response"]["body"]
        assert body["object"] == "chat.completion" and body["usage"]["completion_tokens"] == 4
    assert batch.usage.output_tokens == 4 * n


def _checkpointed_lines(cluster: Cluster, batch_id: str) -> int:
    sql = "SELECT coalesce(sum(lines), 0) FROM batch_chunks WHERE batch_id = :b"
    return db.execute(cluster.replicas[NAMES[0]], sql, b=batch_id)[0][0]


def test_three_replicas_share_one_batch(cluster):
    a, c = cluster.client("replica-a"), cluster.client("replica-c")
    batch = create(a, _lines(3000, "share"))
    done = wait_for(c, batch.id, timeout=600)
    _assert_complete(c, done, 3000, "share")
    shards = cluster.shards(batch.id)
    assert len(shards) == 3000 // SHARD_LINES and all(status == "done" for _, status, _, _, _ in shards)
    assert sum(lines for *_, lines in shards) == 3000
    assert {replica for _, _, _, replica, _ in shards} == set(NAMES)
    # A finalized batch keeps its checkpoint chunks, each line once (GET .../results reads them)
    assert _checkpointed_lines(cluster, batch.id) == 3000


def test_cancel_through_one_replica_stops_every_replica(cluster):
    a, b = cluster.client("replica-a"), cluster.client("replica-b")
    batch = create(a, _lines(3000, "cancel"))
    wait_until(
        lambda: cluster.running(batch.id)["replica-a"] and cluster.running(batch.id)["replica-c"],
        120,
        "replicas a and c to run shards",
        0.2,
    )
    b.batches.cancel(batch.id)
    cancelled_at = time.monotonic()
    # Each replica re-reads the status every second, then aborts, checkpoints and releases: about
    # two seconds on a quiet machine; the bound leaves room for a loaded CI box.
    wait_until(lambda: not cluster.running(batch.id), 10, "every replica to stop", 0.1)
    print(f"every replica released its shards {time.monotonic() - cancelled_at:.1f} s after the cancel")
    done = wait_for(b, batch.id, timeout=120)
    assert done.status == "cancelled"
    counts = done.request_counts
    output, errors = results_by_custom_id(b, done)
    assert 0 < counts.completed < 3000 and counts.total == 3000
    assert (len(output), len(errors)) == (counts.completed, counts.failed)
    assert set(output) | set(errors) == {f"cancel-{i}" for i in range(3000)}
    assert all(line["error"]["code"] == "batch_cancelled" for line in errors.values())
    assert all(line["response"]["status_code"] == 200 for line in output.values())
    assert _checkpointed_lines(cluster, batch.id) == 3000  # the lines that never ran are a chunk too


def test_sigterm_drains_a_replica_and_others_take_its_shards_at_once(cluster):
    a = cluster.client("replica-a")
    batch = create(a, _lines(2000, "term"))
    wait_until(lambda: cluster.running(batch.id)["replica-c"], 120, "replica-c to run a shard", 0.2)
    server = cluster.replicas["replica-c"]
    held = {no for no, status, owner, _, _ in cluster.shards(batch.id) if owner == "replica-c" and status == "running"}
    sent = time.monotonic()
    os.kill(server.pid, signal.SIGTERM)

    def taken_over() -> bool:
        rows = {no: (status, owner) for no, status, owner, _, _ in cluster.shards(batch.id)}
        return all(rows[no][0] == "done" or rows[no][1] not in (None, "replica-c") for no in held)

    wait_until(taken_over, 5, "another replica to claim replica-c's shards", 0.1)
    claimed_after = time.monotonic() - sent
    server.proc.wait(timeout=30)
    exited_after = time.monotonic() - sent
    server.kill()
    assert claimed_after < 5 and exited_after < 30
    assert "draining" in server.log()
    done = wait_for(a, batch.id, timeout=600)
    _assert_complete(a, done, 2000, "term")


def _message_batch(cluster: Cluster, n: int, prefix: str):
    """A Message Batch of `n` requests (Anthropic's API), created through replica-a."""
    client = anthropic_client(cluster.replicas["replica-a"].base_url, "key-a", max_retries=2)
    params = {"model": CHAT_MODEL, "max_tokens": 4, "temperature": 0}
    requests = [
        {"custom_id": f"{prefix}-{i}", "params": {**params, "messages": [{"role": "user", "content": f"q {i}"}]}}
        for i in range(n)
    ]
    return client, client.messages.batches.create(requests=requests)


def _assert_message_batch_complete(client, batch_id: str, n: int, prefix: str) -> None:
    ended = wait_until(
        lambda: (b := client.messages.batches.retrieve(batch_id)).processing_status == "ended" and b,
        600,
        "the message batch to end",
        0.5,
    )
    counts = ended.request_counts
    assert (counts.succeeded, counts.errored, counts.canceled, counts.expired, counts.processing) == (n, 0, 0, 0, 0)
    ids = [r.custom_id for r in client.messages.batches.results(batch_id) if r.result.type == "succeeded"]
    assert len(ids) == n and set(ids) == {f"{prefix}-{i}" for i in range(n)}


def test_sigkill_of_a_replica_mid_run_loses_nothing(cluster):
    """An OpenAI batch and an Anthropic Message Batch run on the same shards and replicas."""
    a = cluster.client("replica-a")
    batch = create(a, _lines(2000, "kill"))
    messages, message_batch = _message_batch(cluster, 2000, "kill-msg")
    wait_until(
        lambda: cluster.running(batch.id)["replica-b"] and cluster.running(message_batch.id)["replica-b"],
        120,
        "replica-b to run a shard of each batch",
        0.2,
    )
    server = cluster.replicas["replica-b"]
    took = kill_alone_and_assert_no_orphans(server.pid)  # its busy engines die with it
    print(f"replica-b's engine processes gone {took:.2f} s after it")
    server.kill()  # its group: nothing should be left, but never leak engines into the suite
    done = wait_for(a, batch.id, timeout=600)
    _assert_complete(a, done, 2000, "kill")
    _assert_message_batch_complete(messages, message_batch.id, 2000, "kill-msg")
