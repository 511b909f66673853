"""Background responses' acceptance on real `batchd serve` processes with the built-in chat
engine (issue #48): thirty run exactly once across a SIGKILL of the server and a restart, and
across two replicas over one Postgres and one S3; one created while another project's
6,000-line batch runs completes within seconds; another project's GET is a 404.

The tests run in this order on one server per backend (its engine starts once, again after the
kill), each on the backend its point needs (engine restarts are minutes): the kill and the busy
batch on SQLite, the second replica on Postgres + S3, the 404 on both. Exactly once is read from the
result files: each response's batch writes one output file of one line, whose custom_id is the
response's id, so thirty responses that ran once leave thirty output lines, one per id."""

from __future__ import annotations

import time
from collections import Counter
from collections.abc import Callable

import openai
import pytest

from harness.client import openai_client
from harness.poll import wait_until
from harness.server import ServerProcess
from tests.conftest import API_KEYS_ENV
from tests.support.batches import CHAT_MODEL, cancel_in_cleanup, chat_line, create, read_lines, wait_for
from tests.support.engines import eager_config

# Its own servers run the built-in models (tests/conftest.py: VLLM_FIXTURES).
pytestmark = pytest.mark.vllm

MAX_OUTPUT_TOKENS = 8
RESPONSES = 30
BIG_BATCH_LINES = 6000
LANE_SECONDS = 5.0
ENDED = ("completed", "incomplete", "failed", "cancelled")


class Durable:
    """One data dir, database and blob store, and the servers started on them (restarts and
    replicas): every one is killed at the end of the module."""

    def __init__(self, tmp_path_factory, database_url: str | None, s3) -> None:
        self.tmp = tmp_path_factory
        self.data_dir = tmp_path_factory.mktemp("durable")
        self.database_url = database_url
        self.s3 = s3
        self.config = eager_config(tmp_path_factory.mktemp("config") / "models.json", {CHAT_MODEL: {}})
        self.servers: list[ServerProcess] = []
        self.server: ServerProcess | None = None

    def start(self, name: str = "replica-0", data_dir=None) -> ServerProcess:
        env = {"BATCHD_API_KEYS": API_KEYS_ENV, "BATCHD_LEASE_SECONDS": "3", "BATCHD_REPLICA_ID": name}
        server = ServerProcess(
            data_dir or self.data_dir,
            self.database_url,
            env=env,
            models=True,
            s3=self.s3,
            args=["--model", CHAT_MODEL, "--config", str(self.config)],
        )
        self.servers.append(server)
        server.start(timeout=600)
        return server

    def kill_all(self) -> None:
        for server in self.servers:
            server.kill()


@pytest.fixture(scope="module")
def durable(tmp_path_factory, database_factory, storage_factory):
    cluster = Durable(tmp_path_factory, database_factory(), storage_factory())
    cluster.server = cluster.start()
    yield cluster
    cluster.kill_all()


def _create(client: openai.OpenAI, n: int):
    return client.responses.create(
        model=CHAT_MODEL,
        input=f"Question number {n}: tell me something.",
        max_output_tokens=MAX_OUTPUT_TOKENS,
        temperature=0,
        background=True,
    )


def _ended(clients: list[openai.OpenAI], ids: list[str]) -> Callable[[], dict]:
    """A check: every response by id once all have ended (read through the clients in turn)."""

    def check() -> dict:
        seen = {i: clients[n % len(clients)].responses.retrieve(i) for n, i in enumerate(ids)}
        return seen if all(r.status in ENDED for r in seen.values()) else {}

    return check


def _assert_ran_once(client: openai.OpenAI, responses: dict) -> None:
    """Each response ended with output and usage, and the project's output files hold one line
    per response, each id once."""
    for response in responses.values():
        # The tiny model rarely stops on its own: vLLM ends it `incomplete` at the limit.
        assert response.status in ("completed", "incomplete"), (response.id, response.status, response.error)
        assert response.output_text != ""
        assert response.usage is not None and 0 < response.usage.output_tokens <= MAX_OUTPUT_TOKENS
    lines = [line for f in client.files.list(purpose="batch_output", limit=100) for line in read_lines(client, f.id)]
    ids = Counter(line["custom_id"] for line in lines)
    mine = {i: ids[i] for i in responses}
    assert mine == dict.fromkeys(responses, 1), mine
    for line in lines:
        if line["custom_id"] in responses:
            assert line["response"]["status_code"] == 200


@pytest.mark.parametrize("backend", ["sqlite"], indirect=True)
def test_thirty_background_responses_run_exactly_once_across_a_sigkill(durable):
    client = durable.server.client("key-a")
    ids = [_create(client, n).id for n in range(RESPONSES)]
    # Kill as soon as the engine has the first (the rest queued, claimed or running): on a quiet
    # host all thirty end within a second or two of that.
    wait_until(
        lambda: client.responses.retrieve(ids[0]).status != "queued",
        timeout=300,
        what="the first response to start",
        interval=0.02,
    )
    last = client.responses.retrieve(ids[-1]).status
    durable.server.kill()
    print(f"the last response at the kill: {last}")
    durable.server = durable.start()
    client = durable.server.client("key-a")
    done = wait_until(_ended([client], ids), timeout=300, what="all thirty to end", interval=0.5)
    _assert_ran_once(client, done)


@pytest.mark.parametrize("backend", ["postgres-s3"], indirect=True)
def test_thirty_background_responses_over_two_replicas(durable):
    # Replicas share the database and the blobs; each has a data dir of its own.
    second = durable.start("replica-1", durable.tmp.mktemp("replica-1"))
    clients = [server.client("key-list") for server in (durable.server, second)]
    ids = [_create(clients[n % 2], n).id for n in range(RESPONSES)]
    done = wait_until(_ended(clients, ids), timeout=300, what="all thirty to end", interval=0.5)
    _assert_ran_once(clients[0], done)
    for i in ids:  # each read through either replica
        assert clients[0].responses.retrieve(i).model_dump() == clients[1].responses.retrieve(i).model_dump()
    second.stop()


@pytest.mark.parametrize("backend", ["sqlite"], indirect=True)
def test_a_response_lands_within_seconds_while_another_projects_big_batch_runs(durable):
    busy = durable.server.client("key-load")
    client = durable.server.client("key-b")
    # 64 tokens each, never ended early: the batch runs for tens of seconds, not the few a
    # 16-token batch took (its counts first moved when it was done: nothing was measured beside it)
    lines = [chat_line(f"line-{i}", f"question {i}", max_tokens=64, ignore_eos=True) for i in range(BIG_BATCH_LINES)]
    batch = create(busy, lines)
    try:
        wait_for(busy, batch.id, until=lambda b: b.request_counts.completed > 0, timeout=300)
        created_at = time.monotonic()
        response = _create(client, 0)
        done = wait_until(
            lambda: (r := client.responses.retrieve(response.id)).status in ENDED and r,
            timeout=120,
            what="the response to end",
            interval=0.05,
        )
        seconds = time.monotonic() - created_at
        running = busy.batches.retrieve(batch.id)
        print(f"create -> ended: {seconds:.2f} s; big batch {running.status} {running.request_counts}")
        assert done.status in ("completed", "incomplete"), done.error
        assert running.status == "in_progress", "the big batch ended first: nothing was measured"
        assert seconds <= LANE_SECONDS, seconds
    finally:
        cancel_in_cleanup(busy, batch.id)


def test_another_projects_get_is_a_404(durable):
    response = _create(durable.server.client("key-a"), 0)
    other = openai_client(durable.server.base_url, "key-b")
    with pytest.raises(openai.NotFoundError) as caught:
        other.responses.retrieve(response.id)
    assert "No such response" in caught.value.message
