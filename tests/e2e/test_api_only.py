"""`batchd serve --api-only`: a replica that serves the HTTP API and runs nothing. It shares the
model server's database, data dir and storage; batches created or cancelled through it are run
(and stopped) by the model server's worker."""

from __future__ import annotations

import httpx
import openai
import psutil
import pytest

from app.domains.models.service import PUBLISH_SECONDS
from harness.client import openai_client
from harness.poll import wait_until
from harness.server import ServerProcess
from tests.support import db
from tests.support.batches import CHAT_MODEL, EMBED_MODEL, chat_line, create, results_by_custom_id, wait_for


@pytest.fixture(scope="module")
def api_only(model_server):
    # models=True: no --no-models beside it, so the flag alone must keep the engines away.
    server = ServerProcess(
        model_server.data_dir,
        model_server.database_url,
        env=model_server.env,
        s3=model_server.s3,
        models=True,
        args=["--api-only"],
    ).start(timeout=60)
    yield server
    server.stop()


@pytest.fixture
def api_client(api_only) -> openai.OpenAI:
    return openai_client(api_only.base_url, "key-a")


def _replica(server: ServerProcess) -> str:
    return httpx.get(f"http://127.0.0.1:{server.port}/health", timeout=5).json()["replica"]


def test_api_only_starts_no_engines(api_only, api_client):
    assert psutil.Process(api_only.pid).children(recursive=True) == []
    assert httpx.get(f"http://127.0.0.1:{api_only.port}/health", timeout=5).json()["status"] == "ok"


def test_api_only_lists_the_models_the_model_server_publishes(api_client, model_client):
    served = sorted((m.id, m.engine_state, m.created) for m in model_client.models.list())
    assert [model for model, _, _ in served] == sorted([CHAT_MODEL, EMBED_MODEL, "tl"])

    def listed():
        return sorted((m.id, m.engine_state, m.created) for m in api_client.models.list())

    wait_until(lambda: listed() == served, 3 * PUBLISH_SECONDS, lambda: f"{served}, not {listed()}", interval=0.5)
    assert api_client.models.retrieve(CHAT_MODEL).engine_state == "ready"
    with pytest.raises(openai.NotFoundError) as error:
        api_client.models.retrieve("no-such-model")
    assert error.value.body["code"] == "model_not_found"


def test_batch_created_through_api_only_runs_on_the_model_server(api_only, api_client, model_server):
    batch = create(api_client, [chat_line(f"split-{i}", f"question {i}", max_tokens=4) for i in range(40)])
    done = wait_for(api_client, batch.id)
    assert done.status == "completed", done
    assert (done.request_counts.total, done.request_counts.completed, done.request_counts.failed) == (40, 40, 0)
    output, errors = results_by_custom_id(api_client, done)
    assert errors == {} and set(output) == {f"split-{i}" for i in range(40)}
    assert all(line["response"]["body"]["usage"]["completion_tokens"] == 4 for line in output.values())
    replicas = {
        row[0] for row in db.execute(model_server, "SELECT replica FROM batch_shards WHERE batch_id = :b", b=batch.id)
    }
    assert replicas == {_replica(model_server)} and _replica(api_only) not in replicas


def test_cancel_through_api_only_stops_the_worker(api_client):
    # Long enough to be cancelled mid-run: 1,500 lines of 64 tokens once all ran before the
    # first completed count was seen (a quiet host, Postgres + S3); lines past the cancel cost nothing.
    n = 1500
    batch = create(
        api_client, [chat_line(f"stop-{i}", f"cancel me {i}", max_tokens=256, ignore_eos=True) for i in range(n)]
    )
    wait_for(api_client, batch.id, until=lambda b: b.request_counts.completed >= 1)
    api_client.batches.cancel(batch.id)
    done = wait_for(api_client, batch.id, timeout=120)
    assert done.status == "cancelled", done
    counts = done.request_counts
    assert 0 < counts.completed < n and counts.total == n
    output, errors = results_by_custom_id(api_client, done)  # asserts no custom_id twice
    assert (len(output), len(errors)) == (counts.completed, counts.failed)
    assert set(output) | set(errors) == {f"stop-{i}" for i in range(n)}
    assert all(line["error"]["code"] == "batch_cancelled" for line in errors.values())
