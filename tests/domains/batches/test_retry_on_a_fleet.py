"""`POST /v1/batches/{batch_id}/retry` with lines that really ran, on a fake upstream fleet
(harness/fake_upstream.py) that fails chosen lines: a retry runs exactly the failed lines, and a
cancel followed by a retry (pause, resume) completes every line exactly once across the two
batches. The official client's raw `post` calls the extension. And a batch of many shards runs in
prompt-prefix order (its ordered copy deleted at the end)."""

from __future__ import annotations

import random
import time
from collections import Counter

import openai
import pytest

from harness.fake_fleet import FakeFleet, upstream_config
from harness.poll import wait_until
from tests.conftest import API_KEYS_ENV
from tests.support import db
from tests.support.app_server import AppServer
from tests.support.batches import create, read_lines, results_by_custom_id, wait_for

MODEL = "fake"


def _line(run: str, custom_id: str, plan: str = "ok") -> dict:
    """A chat line the fleet answers by `plan` (one act per attempt), `user` naming it in the fleet's log."""
    return {
        "custom_id": custom_id,
        "method": "POST",
        "url": "/v1/chat/completions",
        "body": {
            "model": MODEL,
            "messages": [{"role": "user", "content": f"plan:{plan}#{run}-{custom_id}"}],
            "max_tokens": 4,
            "user": f"{run}:{custom_id}",
        },
    }


@pytest.fixture(scope="module")
def fleet(tmp_path_factory):
    # 50 ms a request, 8 at once: a 300-line batch runs for two seconds at least.
    fake = FakeFleet(tmp_path_factory.mktemp("fleet"), delay_ms=50, max_concurrency=8).start()
    yield fake
    fake.stop()


@pytest.fixture(scope="module")
def replicas(start_app, fleet, backend, tmp_path_factory):
    """One app (in process) on SQLite; on Postgres two replicas over one database and bucket,
    shards of 50 lines so that both run each batch."""
    config = upstream_config(
        tmp_path_factory.mktemp("retry-config") / "models.json",
        {MODEL: {"urls": fleet.urls, "model": fleet.model, "max_concurrency": 8, "health_interval_s": 0.5}},
    )
    env = {"BATCHD_API_KEYS": API_KEYS_ENV, "BATCHD_SHARD_LINES": "50", "BATCHD_MODEL_CONFIG_FILE": str(config)}
    first = start_app(env, models=True)
    if backend == "sqlite":
        yield [first]
        return
    # The same data dir: with local blobs too (Postgres alone), both replicas read every file.
    second = AppServer(
        first.data_dir, first.database_url, {**env, "BATCHD_REPLICA_ID": "replica-b"}, first.s3, models=True
    )
    second.start()
    yield [first, second]
    second.stop()


@pytest.fixture(scope="module")
def client(replicas) -> openai.OpenAI:
    """Creates batches on the first replica."""
    return replicas[0].client("key-a")


@pytest.fixture(scope="module")
def other(replicas) -> openai.OpenAI:
    """Cancels, retries and reads on the last replica (the first on SQLite)."""
    return replicas[-1].client("key-a")


def _retry(client: openai.OpenAI, batch_id: str) -> dict:
    return client.post(f"/batches/{batch_id}/retry", cast_to=dict)


def _custom_ids(client: openai.OpenAI, file_id: str) -> list[str]:
    return [line["custom_id"] for line in read_lines(client, file_id)]


def test_a_retry_runs_exactly_the_lines_that_failed(client, other, fleet):
    run = f"{time.monotonic_ns()}"
    lines = [_line(run, f"ok-{i}") for i in range(100)]
    lines += [_line(run, f"bad-{i}", "400,ok") for i in range(0, 100, 10)]  # a 400, then an answer
    first = wait_for(client, create(client, lines, metadata={"job": "flaky"}).id, timeout=120)
    assert first.status == "completed" and first.request_counts.failed == 10
    _, errors = results_by_custom_id(other, first)
    failed = {f"bad-{i}" for i in range(0, 100, 10)}
    assert set(errors) == failed

    again = _retry(other, first.id)
    assert again["retry_of"] == first.id and again["metadata"] == {"job": "flaky"}
    assert sorted(_custom_ids(other, again["input_file_id"])) == sorted(failed)
    second = wait_for(other, again["id"], timeout=120)
    assert second.status == "completed" and second.error_file_id is None
    assert set(_custom_ids(client, second.output_file_id)) == failed
    # The fleet answered each line once: the lines that succeeded were not run again.
    answered = Counter(user.split(":", 1)[1] for _, _, user, _ in fleet.request_log() if user.startswith(f"{run}:"))
    assert answered == Counter({line["custom_id"]: 1 for line in lines})


def test_cancel_then_retry_completes_every_line_exactly_once(client, other, fleet):
    run = f"{time.monotonic_ns()}"
    # The first two lines get no answer until the cancel aborts them (and an answer when retried):
    # the batch cannot end before the cancel, however fast the host.
    lines = [_line(run, f"held-{i}", "hold,ok") for i in range(2)] + [_line(run, f"l-{i}") for i in range(300)]
    held_before = fleet.stats().get("act_hold", 0)
    batch = create(client, lines)
    wait_for(client, batch.id, until=lambda b: b.request_counts.completed >= 20, timeout=120)
    wait_until(lambda: fleet.stats().get("act_hold", 0) >= held_before + 2, 60, "the two held lines to be in flight")
    other.batches.cancel(batch.id)
    paused = wait_for(client, batch.id, timeout=60)
    assert paused.status == "cancelled"
    done_first, not_done = results_by_custom_id(client, paused)
    assert {"held-0", "held-1"} <= set(not_done) and len(done_first) >= 20
    assert {record["error"]["code"] for record in not_done.values()} == {"batch_cancelled"}

    again = _retry(other, paused.id)
    assert sorted(_custom_ids(other, again["input_file_id"])) == sorted(not_done)
    resumed = wait_for(other, again["id"], timeout=120)
    assert resumed.status == "completed" and resumed.error_file_id is None
    done_second = _custom_ids(client, resumed.output_file_id)
    every = sorted(list(done_first) + done_second)
    assert every == sorted(line["custom_id"] for line in lines)  # each line once, none twice


def test_a_batch_runs_in_prompt_prefix_order_and_its_ordered_copy_goes(client, replicas):
    """Questions about 12 documents, shuffled over 6 shards: validation orders the whole batch by
    prompt prefix (app/pipeline/prefix_order.py), so each document's lines are one run of the
    output file (shards in order, each in its copy's order) instead of spread over every shard."""
    run = f"{time.monotonic_ns()}"
    document = " ".join(f"word{n}" for n in range(100))  # ~700 bytes: one prefix group a document
    lines = [
        {
            **_line(run, f"d{d}-q{q}"),
            "body": {
                "model": MODEL,
                "messages": [{"role": "user", "content": f"plan:ok#{run}-d{d:02d} {document} question {q}?"}],
                "max_tokens": 4,
            },
        }
        for d in range(12)
        for q in range(25)
    ]
    random.Random(run).shuffle(lines)
    done = wait_for(client, create(client, lines).id, timeout=120)
    assert done.status == "completed" and done.request_counts.completed == 300
    documents = [custom_id.split("-")[0] for custom_id in _custom_ids(client, done.output_file_id)]
    runs = [d for n, d in enumerate(documents) if n == 0 or documents[n - 1] != d]
    assert sorted(runs) == sorted(f"d{d}" for d in range(12)), runs  # one run each
    server = replicas[0]
    [(project, ordered)] = db.execute(server, "SELECT project, ordered_input FROM batches WHERE id = :id", id=done.id)
    assert ordered is None and not db.has_blob(server, project, f"ordered-{done.id}")
