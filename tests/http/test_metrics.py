"""GET /metrics on a server without models: the token, route templates (never ids) as labels,
upload bytes, batches by status read from the database, and lease takeovers."""

from __future__ import annotations

import asyncio
from concurrent.futures import ThreadPoolExecutor

import openai
import pytest
from sqlalchemy import event

from app.api.monitoring import BatchCounts
from tests.conftest import API_KEYS_ENV
from tests.support import db
from tests.support.batches import chat_line, create, jsonl, wait_for
from tests.support.metrics import scrape, value

TOKEN = "metrics-secret"


@pytest.fixture(scope="module")
def metrics_server(start_app):
    """Its own server: the batch gauges count every batch in the database, at every scrape."""
    return start_app(
        {"BATCHD_API_KEYS": API_KEYS_ENV, "BATCHD_METRICS_TOKEN": TOKEN, "BATCHD_METRICS_CACHE_SECONDS": "0"}
    )


def test_token_is_required_when_configured(metrics_server):
    url = metrics_server.base_url.removesuffix("/v1") + "/metrics"
    for headers in ({}, {"Authorization": "Bearer wrong"}, {"Authorization": f"Basic {TOKEN}"}):
        response = metrics_server.http.get(url, headers=headers)
        assert response.status_code == 401
        assert response.json()["error"]["type"] == "invalid_request_error"
    response = metrics_server.http.get(url, headers={"Authorization": f"Bearer {TOKEN}"})
    assert response.status_code == 200 and response.headers["content-type"].startswith("text/plain")


def test_open_by_default(server, client):
    """Without BATCHD_METRICS_TOKEN a scrape with no credentials is answered, with live counts."""
    labels = {"method": "GET", "route": "/v1/files", "status": "200"}
    before = value(scrape(server), "batchd_http_requests_total", **labels)
    client.files.list()
    client.files.list()
    assert value(scrape(server), "batchd_http_requests_total", **labels) - before == 2


def test_requests_uploads_batches_and_takeovers(metrics_server):
    client = metrics_server.client("key-a")
    before = scrape(metrics_server, TOKEN)
    data = b"x" * 1234
    file = client.files.create(file=("notes.txt", data), purpose="user_data")
    client.files.retrieve(file.id)
    with pytest.raises(openai.NotFoundError):
        client.files.retrieve("file-nope")
    batch = create(client, [chat_line("a")])  # no models here: fails validation
    assert wait_for(client, batch.id, timeout=60).status == "failed"

    # A batch whose worker died: its lease (owned elsewhere) expired, so this server takes it over.
    db.execute(
        metrics_server,
        "UPDATE batches SET status = 'validating', failed_at = NULL, errors = NULL, "
        "lease_owner = 'crashed-replica', lease_expires_at = 1 WHERE id = :id",
        id=batch.id,
    )
    assert wait_for(client, batch.id, timeout=60).status == "failed"

    after = scrape(metrics_server, TOKEN)
    grew = lambda name, **labels: value(after, name, **labels) - value(before, name, **labels)  # noqa: E731
    route = "/v1/files/{file_id}"
    assert grew("batchd_http_requests_total", method="GET", route=route, status="200") == 1
    assert grew("batchd_http_requests_total", method="GET", route=route, status="404") == 1
    assert grew("batchd_http_request_duration_seconds_count", method="GET", route=route) == 2
    assert grew("batchd_http_requests_total", method="POST", route="/v1/files", status="200") == 2
    assert grew("batchd_upload_bytes_total") == len(data) + len(jsonl([chat_line("a")]))
    assert value(after, "batchd_batches", status="failed") == 1
    assert value(after, "batchd_batches", status="completed") == 0
    assert grew("batchd_lease_takeovers_total") == 1  # the counter is the process's: apps in it share it
    text = metrics_server.http.get(
        metrics_server.base_url.removesuffix("/v1") + "/metrics", headers={"Authorization": f"Bearer {TOKEN}"}
    ).text
    assert file.id not in text and batch.id not in text and "file-nope" not in text


def _count_aggregates(server) -> list[str]:
    """The batch-count queries the server's database runs from now on (GROUP BY over batches)."""
    seen: list[str] = []

    def before_execute(_conn, _cursor, statement: str, *_args) -> None:
        if "GROUP BY batches.status" in statement:
            seen.append(statement)

    event.listen(server.runtime.db.read_engine.sync_engine, "before_cursor_execute", before_execute)
    return seen


def test_quick_scrapes_count_batches_once_per_interval(start_app):
    """However often /metrics is scraped, in turn or all at once, the database counts batches at
    most once per BATCHD_METRICS_CACHE_SECONDS."""
    server = start_app({"BATCHD_API_KEYS": API_KEYS_ENV, "BATCHD_METRICS_CACHE_SECONDS": "3600"})
    aggregates = _count_aggregates(server)
    client = server.client("key-a")
    create(client, [chat_line("a")])  # a batch to count (it fails validation: no models here)
    url = server.base_url.removesuffix("/v1") + "/metrics"
    for _ in range(20):
        assert server.http.get(url).status_code == 200
    with ThreadPoolExecutor(8) as pool:
        assert {r.status_code for r in pool.map(lambda _: server.http.get(url), range(20))} == {200}
    assert len(aggregates) == 1
    counted = scrape(server)  # the one batch, validating or failed by the time it was counted
    assert sum(value(counted, "batchd_batches", status=status) for status in ("validating", "failed")) == 1


def test_batch_counts_are_read_again_once_the_interval_passes():
    now = [100.0]
    counts = BatchCounts(clock=lambda: now[0])
    reads: list[int] = []

    class Db:  # what BatchCounts reads through: one session, one aggregate
        def read(self):
            return _Session(reads)

    async def scenario() -> None:
        first = await asyncio.gather(*(counts.get(Db(), 15) for _ in range(10)))  # type: ignore[arg-type]
        assert len(reads) == 1 and all(c == first[0] for c in first)  # ten at once: one read
        now[0] += 14.9
        await counts.get(Db(), 15)  # type: ignore[arg-type]
        assert len(reads) == 1
        now[0] += 0.2
        await counts.get(Db(), 15)  # type: ignore[arg-type]
        assert len(reads) == 2
        await counts.get(Db(), 0)  # type: ignore[arg-type]
        assert len(reads) == 3

    asyncio.run(scenario())


class _Session:
    def __init__(self, reads: list[int]) -> None:
        self.reads = reads

    async def __aenter__(self):
        return self

    async def __aexit__(self, *exc) -> None:
        return None

    async def execute(self, _statement):
        self.reads.append(1)
        await asyncio.sleep(0.01)  # the others arrive while this read is under way
        return _Result()


class _Result:
    def all(self):
        return [("completed", 3)]
