"""Faults under a running batch, on a server whose blob directory is an 8 MB tmpfs and whose
database is a private Postgres (never the machine's shared one). The lines run on the paced fake
upstream: the faults are batchd's storage, not the engine's, and it starts in a second.

- the blob disk is full under a batch: its checkpoints (finished lines' results are blobs) and
  its finalize fail, and it retries; when space returns it completes with every line once;
- Postgres stops mid-batch: requests answer 503 + Retry-After while it is down; when it is
  back the batch completes with every line exactly once.
"""

from __future__ import annotations

import httpx
import pytest

from harness.client import openai_client
from harness.poll import wait_until
from harness.server import ServerProcess
from tests.conftest import API_KEYS_ENV
from tests.support.batches import CHAT_MODEL, chat_line, create, results_by_custom_id, upload, wait_for
from tests.support.faults import PrivatePostgres, fill, tmpfs
from tests.support.upstreams import paced_fleet

# Servers in front of fake upstream fleets, no vLLM: not in make test-fast (tests/conftest.py).
pytestmark = pytest.mark.engine

HEADERS = {"Authorization": "Bearer key-a"}


@pytest.fixture(scope="module")
def private_pg():
    pg = PrivatePostgres().init()
    yield pg
    pg.destroy()


@pytest.fixture(scope="module")
def fleet(tmp_path_factory):
    """The paced fake upstream and the model config serving it."""
    fleet, config = paced_fleet(tmp_path_factory.mktemp("upstream"), CHAT_MODEL)
    yield fleet, config
    fleet.stop()


@pytest.fixture(scope="module")
def fault_server(tmp_path_factory, private_pg, fleet):
    data_dir = tmp_path_factory.mktemp("faults")
    _, config = fleet
    with tmpfs(data_dir / "blobs", "8m"):
        server = ServerProcess(
            data_dir,
            private_pg.url,
            models=True,
            args=["--config", str(config)],
            env={"BATCHD_API_KEYS": API_KEYS_ENV, "BATCHD_RETRY_BACKOFF_SECONDS": "1", "BATCHD_LEASE_SECONDS": "3"},
        ).start()
        yield server
        server.stop()


@pytest.fixture
def fault_client(fault_server):
    # Retries as users run it: 503s (database down) are retried by the client itself.
    return openai_client(fault_server.base_url, "key-a", max_retries=8)


def _assert_every_line_once(client, batch, n: int) -> None:
    assert batch.status == "completed", batch
    assert (batch.request_counts.total, batch.request_counts.completed, batch.request_counts.failed) == (n, n, 0)
    output, errors = results_by_custom_id(client, batch)
    assert set(output) == {f"r{i}" for i in range(n)} and errors == {}


def test_a_full_blob_disk_holds_the_batch_and_loses_no_line(fault_client, fault_server, fleet):
    n = 40
    lines = [chat_line(f"r{i}", f"Count to {i}") for i in range(n)]
    file = upload(fault_client, lines)
    served_before = fleet[0].stats().get("requests", 0)
    filler = fill(fault_server.data_dir / "blobs")
    try:
        batch = fault_client.batches.create(
            input_file_id=file.id, endpoint="/v1/chat/completions", completion_window="24h"
        )
        # Finished lines are checkpointed as blobs (and the files are blobs too): every attempt
        # fails for want of space, nothing is recorded, and the next attempt (after the 1 s
        # backoff) runs the lines again. An attempt sends each of the n lines at most once, so
        # more than 2n requests at the upstream means at least three attempts.
        wait_until(
            lambda: fleet[0].stats().get("requests", 0) - served_before > 2 * n,
            timeout=60,
            what="three attempts at the lines",
        )
        stuck = fault_client.batches.retrieve(batch.id)
        assert stuck.status in ("in_progress", "finalizing") and stuck.output_file_id is None, stuck
        assert stuck.request_counts.completed == 0, stuck.request_counts  # no line was recorded
        assert "No space left on device" in fault_server.log()
    finally:
        filler.unlink()
    _assert_every_line_once(fault_client, wait_for(fault_client, batch.id, timeout=120), n)


def test_postgres_stopped_mid_batch_gives_503_then_nothing_is_lost(fault_client, fault_server, private_pg):
    n = 2000  # about ten seconds on the paced upstream: the outage falls mid-batch
    batch = create(fault_client, [chat_line(f"r{i}", f"Write about {i}", max_tokens=16) for i in range(n)])
    wait_for(fault_client, batch.id, until=lambda b: b.request_counts.completed >= 16)

    logged = len(fault_server.log())
    private_pg.stop()
    try:
        calls = [
            lambda: httpx.get(f"{fault_server.base_url}/batches/{batch.id}", headers=HEADERS, timeout=30),
            lambda: httpx.get(f"{fault_server.base_url}/files", headers=HEADERS, timeout=30),
            lambda: httpx.post(
                f"{fault_server.base_url}/files",
                headers=HEADERS,
                timeout=30,
                files={"file": ("a.jsonl", b'{"a": 1}\n')},
                data={"purpose": "batch"},
            ),
            lambda: httpx.post(
                f"{fault_server.base_url}/uploads",
                headers=HEADERS,
                timeout=30,
                json={"bytes": 1, "filename": "a.jsonl", "mime_type": "text/jsonl", "purpose": "batch"},
            ),
        ]
        for call in calls:
            response = call()
            assert response.status_code == 503, response.text
            assert int(response.headers["retry-after"]) >= 1
            error = response.json()["error"]
            assert error["type"] == "server_error" and "database" in error["message"]
        # The worker's work on the batch and its claims fail meanwhile.
        wait_until(
            lambda: (
                f"work on batch {batch.id} stopped with an error" in fault_server.log()[logged:]
                and "claiming work failed" in fault_server.log()[logged:]
            ),
            timeout=60,
            what="the worker failing against the stopped database",
        )
    finally:
        private_pg.start()

    _assert_every_line_once(fault_client, wait_for(fault_client, batch.id, timeout=600), n)
    # The outage was answered, not crashed on: no unhandled tracebacks in the server's log.
    assert "Exception in ASGI application" not in fault_server.log()
