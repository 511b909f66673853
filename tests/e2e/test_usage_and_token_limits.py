"""Sharing batchd between teams: the Usage API's sums against the output files of batches run by
two replicas over one Postgres and one bucket, admin-only access, and the enqueued-token limit
per project and model. Upstream models on the fake fleet (the fleet has no /tokenize, so prompt
tokens are the documented estimate: a token per 4 bytes of message text)."""

from __future__ import annotations

import os
import signal
import subprocess
import threading
import time
from collections import Counter, defaultdict

import openai
import pytest

from harness import postgres
from harness.client import openai_client
from harness.fake_fleet import FakeFleet, upstream_config
from harness.poll import wait_until
from harness.server import BATCHD, ServerProcess
from tests.conftest import API_KEYS_ENV
from tests.support import db
from tests.support.batches import chat_lines, create, results_by_custom_id, wait_for

# Servers in front of fake upstream fleets, no vLLM: not in make test-fast (tests/conftest.py).
pytestmark = pytest.mark.engine

SECRET = "usage-test-secret"
TOKEN_LIMIT = 500  # the server-wide default in this cluster
TEXT_100_TOKENS = "x" * 400


class Cluster:
    def __init__(self, tmp_path_factory, storage_env: dict[str, str]) -> None:
        self.tmp = tmp_path_factory.mktemp("usage-cluster")
        self.database_url = postgres.create_database()
        self.fleet = FakeFleet(self.tmp).start()
        # One line at a time, 2 s each: a batch of it stays in progress while the test looks.
        self.slow_fleet = FakeFleet(self.tmp, delay_ms=2000, max_concurrency=1).start()
        # About 400 lines/s: a replica can be killed in the middle of a batch.
        self.paced_fleet = FakeFleet(self.tmp, delay_ms=20, max_concurrency=8).start()
        config = upstream_config(
            self.tmp / "models.json",
            {
                "chat-a": {"urls": self.fleet.urls, "model": self.fleet.model},
                "chat-b": {"urls": self.fleet.urls, "model": self.fleet.model},
                "embed": {"urls": self.fleet.urls, "model": self.fleet.model},
                "slow-chat": {"urls": self.slow_fleet.urls, "model": self.slow_fleet.model, "max_concurrency": 1},
                "paced-chat": {"urls": self.paced_fleet.urls, "model": self.paced_fleet.model, "max_concurrency": 8},
            },
        )
        env = {
            "BATCHD_API_KEYS": API_KEYS_ENV,
            "BATCHD_SECRET_KEY": SECRET,
            "BATCHD_SHARD_LINES": "10",
            "BATCHD_LEASE_SECONDS": "3",
            "BATCHD_PROJECT_MAX_ENQUEUED_TOKENS": str(TOKEN_LIMIT),
            **storage_env,
        }
        self.replicas = [
            ServerProcess(
                self.tmp / name,
                self.database_url,
                env={**env, "BATCHD_REPLICA_ID": name},
                models=True,
                args=["--config", str(config)],
            )
            for name in ("usage-a", "usage-b")
        ]
        threads = [threading.Thread(target=r.start) for r in self.replicas]
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join()
        self.admin_key = self.batchd("keys", "create", "--project", "ops", "--admin").stdout.strip().split()[-1]

    def batchd(self, *args: str) -> subprocess.CompletedProcess:
        cmd = [str(BATCHD), *args, "--data-dir", str(self.tmp / "cli"), "--database-url", self.database_url]
        return subprocess.run(
            cmd,
            capture_output=True,
            text=True,
            check=True,
            timeout=120,
            env={**os.environ, "BATCHD_SECRET_KEY": SECRET},
        )

    def client(self, replica: int, key: str) -> openai.OpenAI:
        return openai_client(self.replicas[replica].base_url, key, max_retries=2)

    def stop(self) -> None:
        for server in self.replicas:
            server.kill()
        for fleet in (self.fleet, self.slow_fleet, self.paced_fleet):
            fleet.kill()
        postgres.drop_database(self.database_url)


@pytest.fixture(scope="module")
def cluster(tmp_path_factory, replica_storage_env):
    cluster = Cluster(tmp_path_factory, replica_storage_env)
    try:
        yield cluster
    finally:
        cluster.stop()


def _embed(n: int, prefix: str) -> list[dict]:
    return [
        {
            "custom_id": f"{prefix}-{i}",
            "method": "POST",
            "url": "/v1/embeddings",
            "body": {"model": "embed", "input": ["a"] * (1 + i % 4)},
        }
        for i in range(n)
    ]


def _usage(client: openai.OpenAI, kind: str, **params) -> dict:
    return client.get(f"/organization/usage/{kind}", cast_to=object, options={"params": params})


def _results(page: dict) -> list[dict]:
    return [r for bucket in page["data"] for r in bucket["results"]]


def test_usage_sums_equal_the_output_files_of_batches_run_on_two_replicas(cluster):
    started = int(time.time())
    a0, a1, b1 = cluster.client(0, "key-a"), cluster.client(1, "key-a"), cluster.client(1, "key-b")
    submitted = [
        (a0, create(a0, chat_lines(40, "chat-a", "a1"))),
        (a1, create(a1, chat_lines(25, "chat-a", "a2"))),
        (a0, create(a0, chat_lines(15, "chat-b", "a3"))),
        (b1, create(b1, chat_lines(30, "chat-a", "b1"))),
        (b1, create(b1, _embed(35, "b2"), endpoint="/v1/embeddings")),
    ]
    expected: dict[tuple, Counter] = defaultdict(Counter)  # (kind, project, model, batch) -> sums
    replicas = set()
    for client, batch in submitted:
        done = wait_for(client, batch.id, timeout=120)
        assert done.status == "completed", done
        output, errors = results_by_custom_id(client, done)
        assert errors == {}
        kind = "embeddings" if batch.endpoint == "/v1/embeddings" else "completions"
        project = "proj-a" if client.api_key == "key-a" else "proj-b"
        for line in output.values():
            usage = line["response"]["body"]["usage"]
            sums = expected[(kind, project, done.model, batch.id)]
            sums["input_tokens"] += usage["prompt_tokens"]
            sums["output_tokens"] += usage.get("completion_tokens", 0)
            sums["num_model_requests"] += 1
        replicas |= {
            row[0]
            for row in db.execute(
                cluster.replicas[0], "SELECT replica FROM batch_shards WHERE batch_id = :b", b=batch.id
            )
        }
    assert replicas == {"usage-a", "usage-b"}, "both replicas ran lines"
    admin = cluster.client(0, cluster.admin_key)
    window = {"start_time": started - 60, "end_time": int(time.time()) + 60}

    def grouped(kind: str, group_by: list[str], **params) -> Counter:
        page = _usage(admin, kind, **window, bucket_width="1m", limit=1440, group_by=group_by, **params)
        assert page["object"] == "page" and page["has_more"] is False and page["next_page"] is None
        sums: Counter = Counter()
        for bucket in page["data"]:
            assert bucket["object"] == "bucket" and bucket["end_time"] - bucket["start_time"] == 60
            for r in bucket["results"]:
                assert r["object"] == f"organization.usage.{kind}.result"
                key = tuple(r["batch_id"] if g == "batch" else r[g] for g in group_by)
                sums[(*key, "input_tokens")] += r["input_tokens"]
                sums[(*key, "num_model_requests")] += r["num_model_requests"]
                if kind == "completions":
                    sums[(*key, "output_tokens")] += r["output_tokens"]
                    assert r["input_cached_tokens"] == 0
        return sums

    def want(kind: str, pick, projects=("proj-a", "proj-b")) -> Counter:
        sums: Counter = Counter()
        for (k, project, model, batch_id), counts in expected.items():
            if k == kind and project in projects:
                for name, value in counts.items():
                    if kind == "completions" or name != "output_tokens":
                        sums[(*pick(project, model, batch_id), name)] += value
        return sums

    assert grouped("completions", ["project_id", "model"]) == want("completions", lambda p, m, b: (p, m))
    assert grouped("completions", ["batch"]) == want("completions", lambda p, m, b: (b,))
    assert grouped("embeddings", ["project_id", "model"]) == want("embeddings", lambda p, m, b: (p, m))
    assert grouped("completions", ["model"], project_ids=["proj-b"]) == want(
        "completions", lambda p, m, b: (m,), projects=("proj-b",)
    )
    # One day bucket holds the same totals as the minutes, read by another replica.
    day = _usage(cluster.client(1, cluster.admin_key), "completions", **window, bucket_width="1d", models=["chat-b"])
    [total] = _results(day)
    assert total["model"] is None and total["project_id"] is None
    assert total["num_model_requests"] == 15 and total["input_tokens"] == sum(
        c["input_tokens"] for (k, _, m, _), c in expected.items() if k == "completions" and m == "chat-b"
    )


def test_usage_pages_through_empty_buckets(cluster):
    admin = cluster.client(0, cluster.admin_key)
    start = int(time.time()) // 60 * 60 - 600
    first = _usage(admin, "completions", start_time=start, end_time=start + 300, bucket_width="1m", limit=3)
    assert [b["start_time"] for b in first["data"]] == [start, start + 60, start + 120]
    assert first["has_more"] is True
    second = _usage(
        admin,
        "completions",
        start_time=start,
        end_time=start + 300,
        bucket_width="1m",
        limit=3,
        page=first["next_page"],
    )
    assert [b["start_time"] for b in second["data"]] == [start + 180, start + 240]
    assert second["has_more"] is False and second["next_page"] is None


def test_usage_is_for_admin_keys_only(cluster):
    for key in ("key-a", "key-b"):
        with pytest.raises(openai.PermissionDeniedError) as refused:
            _usage(cluster.client(0, key), "completions", start_time=0)
        assert refused.value.status_code == 403
        assert refused.value.body["type"] == "invalid_request_error"
        assert refused.value.body["code"] == "insufficient_permissions"
    with pytest.raises(openai.BadRequestError) as bad:
        _usage(cluster.client(0, cluster.admin_key), "completions", start_time=0, bucket_width="2h")
    assert bad.value.body["param"] == "bucket_width"


def _token_limit_error(batch) -> dict:
    assert batch.status == "failed", batch
    [error] = batch.errors.data
    return {"code": error.code, "line": error.line, "param": error.param, "message": error.message}


def _queued_batch_ids(client) -> set[str]:
    return {b["id"] for p in client.get("/queue", cast_to=dict)["data"] for b in p["running"] + p["queued"]}


def test_token_limit_applies_per_project_and_model(cluster):
    a, b = cluster.client(0, "key-list"), cluster.client(1, "key-batch-list")
    # 6 lines of 100 tokens: over the 500-token default on their own.
    too_big = wait_for(a, create(a, chat_lines(6, "chat-a", "big", TEXT_100_TOKENS)).id)
    error = _token_limit_error(too_big)
    assert error["code"] == "token_limit_exceeded" and error["line"] is None and error["param"] is None
    assert error["message"].startswith("Enqueued token limit reached for chat-a in project proj-list. Limit: 500")
    assert too_big.request_counts.total == 0

    # 3 slow lines (300 tokens) stay enqueued while the next batches validate.
    slow = create(a, chat_lines(3, "slow-chat", "slow", TEXT_100_TOKENS))
    wait_for(a, slow.id, statuses={"in_progress"}, timeout=60)
    over = wait_for(a, create(a, chat_lines(3, "slow-chat", "over", TEXT_100_TOKENS)).id, timeout=60)
    assert _token_limit_error(over)["code"] == "token_limit_exceeded"
    # The same project's other model and another project's same model have their own room.
    other_model = create(a, chat_lines(3, "chat-a", "other-model", TEXT_100_TOKENS))
    other_project = create(b, chat_lines(3, "slow-chat", "other-project", TEXT_100_TOKENS))
    # The queue view: a project's key sees its own project, an admin key every project.
    admin = cluster.client(0, cluster.admin_key)
    wait_until(
        lambda: {slow.id, other_project.id} <= _queued_batch_ids(admin),
        30,
        "both projects' batches on the admin's queue",
    )
    assert {p["project"] for p in a.get("/queue", cast_to=dict)["data"]} == {"proj-list"}
    assert other_project.id not in _queued_batch_ids(a)
    assert wait_for(a, other_model.id, timeout=60).status == "completed"
    assert wait_for(b, other_project.id, statuses={"in_progress", "completed"}, timeout=60).status != "failed"

    # A project's own limit overrides the default: 0 closes it to new work.
    cluster.batchd("projects", "set", "proj-list", "--max-enqueued-tokens", "0")
    closed = wait_for(a, create(a, chat_lines(1, "chat-b", "closed")).id, timeout=60)
    assert "Limit: 0 enqueued tokens" in _token_limit_error(closed)["message"]
    cluster.batchd("projects", "set", "proj-list", "--max-enqueued-tokens", "default")
    assert wait_for(a, slow.id, timeout=60).status == "completed"
    # 400 tokens with nothing else of slow-chat enqueued here: under the default again.
    reopened = wait_for(a, create(a, chat_lines(4, "slow-chat", "after", TEXT_100_TOKENS)).id, statuses={"in_progress"})
    assert reopened.status == "in_progress"


def _kill_while_holding_a_shard(cluster: Cluster, batch_id: str) -> None:
    """Kill replica 0 while it holds a running shard of the batch. Its shards last tens of
    milliseconds, so it is stopped first and killed only if it holds one then (else let go on)."""
    held = "SELECT count(*) FROM batch_shards WHERE batch_id = :b AND status = 'running' AND lease_owner = 'usage-a'"
    pid = cluster.replicas[0].pid
    deadline = time.monotonic() + 60
    while True:
        os.kill(pid, signal.SIGSTOP)
        if db.execute(cluster.replicas[1], held, b=batch_id)[0][0] > 0:
            break
        os.kill(pid, signal.SIGCONT)
        assert time.monotonic() < deadline, "usage-a never held a shard of the batch"
        time.sleep(0.05)
    cluster.replicas[0].kill()


def test_usage_counts_each_line_once_when_a_replica_is_killed_mid_batch(cluster):
    """Last in the module: replica 0 stays dead. Its unflushed lines run again on replica 1; the
    usage of the lines it had stored is not counted twice."""
    cluster.batchd("projects", "set", "proj-a", "--max-enqueued-tokens", "1000000")
    survivor = cluster.client(1, "key-a")
    batch = create(survivor, chat_lines(2000, "paced-chat", "crash"))
    wait_for(survivor, batch.id, until=lambda b: b.request_counts.completed >= 300, timeout=120)
    _kill_while_holding_a_shard(cluster, batch.id)
    done = wait_for(survivor, batch.id, timeout=240)
    assert done.status == "completed" and done.request_counts.completed == 2000, done
    output, _ = results_by_custom_id(survivor, done)
    taken_over = db.execute(
        cluster.replicas[1], "SELECT count(*) FROM batch_shards WHERE batch_id = :b AND taken_over = 1", b=batch.id
    )[0][0]
    assert taken_over > 0, "replica 1 resumed shards the killed replica held"
    admin = cluster.client(1, cluster.admin_key)
    page = _usage(admin, "completions", start_time=int(time.time()) - 3600, group_by=["batch"], bucket_width="1h")
    [mine] = [r for r in _results(page) if r["batch_id"] == batch.id]
    assert mine["num_model_requests"] == len(output) == 2000
    assert mine["input_tokens"] == sum(line["response"]["body"]["usage"]["prompt_tokens"] for line in output.values())
    assert mine["output_tokens"] == done.usage.output_tokens
