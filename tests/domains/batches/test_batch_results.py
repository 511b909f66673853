"""`GET /v1/batches/{batch_id}/results` (batchd's, beside OpenAI's API), read with the official
client's raw `get` while 3,000-line batches run in front of a fake upstream fleet that fails
every tenth line: on SQLite (one app in process) and on Postgres + S3 with two replicas (apps in
process) sharing the batch (reads alternate between them). What was read while it ran and after, cursor after
cursor, is every line of the output and error files exactly once."""

from __future__ import annotations

import json
import time

import httpx
import openai
import pytest

from harness.fake_fleet import FakeFleet, upstream_config
from harness.poll import wait_until
from tests.conftest import API_KEYS_ENV
from tests.support import db
from tests.support.app_server import AppServer
from tests.support.batches import TERMINAL, chat_line, create, wait_for

MODEL = "fake-chat"
LINES = 3000
FAIL_EVERY = 10  # the fleet answers these lines 400: error-file lines


@pytest.fixture(scope="module")
def replicas(backend, database_factory, storage_factory, tmp_path_factory) -> list[AppServer]:
    """One server on SQLite; two replicas over one Postgres database and one bucket otherwise.
    The fleet answers about 800 lines a second (20 ms, 16 at once): a batch runs a few seconds."""
    log_dir = tmp_path_factory.mktemp("results-fleet")
    fleet = FakeFleet(log_dir, delay_ms=20, max_concurrency=16).start()
    config = upstream_config(
        log_dir / "models.json", {MODEL: {"urls": fleet.urls, "model": fleet.model, "max_concurrency": 16}}
    )
    database_url, s3 = database_factory(), storage_factory()
    env = {"BATCHD_API_KEYS": API_KEYS_ENV, "BATCHD_SHARD_LINES": "500", "BATCHD_MODEL_CONFIG_FILE": str(config)}
    servers = [
        AppServer(
            tmp_path_factory.mktemp(f"results-{n}"),
            database_url,
            env={**env, "BATCHD_REPLICA_ID": f"results-{n}"},
            models=True,
            s3=s3,
        )
        for n in range(1 if database_url is None else 2)
    ]
    try:
        for server in servers:
            server.start()
        yield servers
    finally:
        for server in servers:
            server.stop()
        fleet.stop()


def _clients(replicas: list[AppServer], key: str = "key-a") -> list[openai.OpenAI]:
    return [server.client(key) for server in replicas]


def _lines(prefix: str) -> list[dict]:
    return [
        chat_line(f"{prefix}-{i}", f"plan:400#{prefix}-{i}" if i % FAIL_EVERY == 0 else f"q {i}", model=MODEL)
        for i in range(LINES)
    ]


def _read(client: openai.OpenAI, batch_id: str, **params) -> tuple[list[bytes], str, bool]:
    """(lines, x-results-cursor, x-batch-incomplete) of one read."""
    query = {k: v for k, v in params.items() if v is not None}
    response = client.get(f"/batches/{batch_id}/results", options={"params": query}, cast_to=httpx.Response)
    assert response.headers["content-type"].startswith("application/jsonl")
    incomplete = response.headers["x-batch-incomplete"]
    assert incomplete in ("true", "false")
    return response.content.splitlines(), response.headers["x-results-cursor"], incomplete == "true"


def _file_lines(client: openai.OpenAI, file_id: str | None) -> list[bytes]:
    return [] if file_id is None else client.files.content(file_id).content.splitlines()


def _custom_id(line: bytes) -> str:
    return json.loads(line)["custom_id"]


def _follow(clients: list[openai.OpenAI], batch_id: str, limit: int | None) -> tuple[list[bytes], list[int]]:
    """Read with each read's cursor, alternating replicas, until a read that began after the
    batch ended has come back whole. Returns every line read and how many lines each read
    that began while the batch ran returned (the reads that came back whole only)."""
    lines: list[bytes] = []
    seen: set[str] = set()
    growth: list[int] = []
    cursor = None
    for n in range(100_000):
        page, cursor, incomplete = _read(clients[n % len(clients)], batch_id, after=cursor, limit=limit)
        for line in page:
            custom_id = _custom_id(line)
            assert custom_id not in seen, f"{custom_id} read twice"
            seen.add(custom_id)
        lines += page
        whole = limit is None or len(page) < limit
        if whole and not incomplete:
            return lines, growth
        if whole:
            growth.append(len(page))
            time.sleep(0.2)
    raise AssertionError("the batch never ended")


def test_results_read_while_running_grow_without_repeats_and_add_up_to_the_files(replicas):
    clients = _clients(replicas)
    batch = create(clients[0], _lines("run"))
    lines, growth = _follow(clients, batch.id, limit=None)
    done = wait_for(clients[0], batch.id, TERMINAL, timeout=5)
    assert done.status == "completed" and done.request_counts.failed == LINES // FAIL_EVERY
    # Read while it ran: more than one read returned lines, and none came back twice.
    assert sum(1 for n in growth if n) >= 2, growth
    if len(replicas) > 1:  # the replicas shared the batch
        ran = db.execute(replicas[0], "SELECT DISTINCT replica FROM batch_shards WHERE batch_id = :b", b=batch.id)
        assert len(ran) == len(replicas), ran
    output, errors = _file_lines(clients[0], done.output_file_id), _file_lines(clients[0], done.error_file_id)
    assert sorted(lines) == sorted(output + errors)  # byte for byte, each once
    # After the end, from any replica: the same lines, each filter its own file.
    assert sorted(_read(clients[-1], batch.id)[0]) == sorted(output + errors)
    assert sorted(_read(clients[0], batch.id, status="completed")[0]) == sorted(output)
    assert sorted(_read(clients[-1], batch.id, status="failed")[0]) == sorted(errors)
    failed = json.loads(errors[0])
    assert failed["response"]["status_code"] == 400
    assert [json.loads(line) for line in _read(clients[0], batch.id, custom_id=failed["custom_id"])[0]] == [failed]


def test_a_download_resumed_with_after_misses_and_repeats_nothing(replicas):
    clients = _clients(replicas)
    batch = create(clients[0], _lines("resume"))
    # Pages of 700 while it runs, then on after the end; each page's cursor resumes the next.
    lines, _ = _follow(clients, batch.id, limit=700)
    done = wait_for(clients[0], batch.id, TERMINAL, timeout=5)
    expected = _file_lines(clients[0], done.output_file_id) + _file_lines(clients[0], done.error_file_id)
    assert len(lines) == LINES and sorted(lines) == sorted(expected)
    # Resumed in the middle of the ended batch, filtered: exactly the rest, in the same order.
    whole = _read(clients[0], batch.id, status="failed")[0]
    head, cursor, _ = _read(clients[-1], batch.id, status="failed", limit=123)
    rest, end, incomplete = _read(clients[0], batch.id, status="failed", after=cursor)
    assert head + rest == whole and len(head) == 123 and not incomplete
    assert _read(clients[-1], batch.id, after=end) == ([], end, False)  # nothing after the end


def test_a_cancelled_batch_reads_its_never_run_lines_too(replicas):
    clients = _clients(replicas)
    lines = _lines("cancel")
    lines[-1]["body"]["messages"][0]["content"] = "plan:hold#cancel-last"  # unanswered: it cannot end first
    batch = create(clients[0], lines)
    wait_until(lambda: len(_read(clients[-1], batch.id)[0]) > 0, 60, "the first results", 0.1)
    clients[-1].batches.cancel(batch.id)
    read, _ = _follow(clients, batch.id, limit=None)
    done = wait_for(clients[0], batch.id, TERMINAL, timeout=5)
    assert done.status == "cancelled"
    output, errors = _file_lines(clients[0], done.output_file_id), _file_lines(clients[0], done.error_file_id)
    assert sorted(read) == sorted(output + errors) and len(read) == LINES
    last = [json.loads(line) for line in read if _custom_id(line) == f"cancel-{LINES - 1}"]
    assert [line["error"]["code"] for line in last] == ["batch_cancelled"]


def test_bad_reads_get_openai_errors(replicas):
    clients = _clients(replicas)
    a = create(clients[0], _lines("bad")[:20])
    b = create(clients[0], _lines("other")[:20])
    cursor = _read(clients[0], a.id, limit=1)[1]
    with pytest.raises(openai.BadRequestError) as info:
        _read(clients[-1], b.id, after=cursor)
    assert (info.value.param, info.value.code) == ("after", "invalid_cursor")
    with pytest.raises(openai.BadRequestError) as info:
        _read(clients[0], a.id, after="not-a-cursor")
    assert info.value.param == "after"
    with pytest.raises(openai.BadRequestError) as info:
        _read(clients[0], a.id, status="succeeded")
    assert info.value.body["type"] == "invalid_request_error"
    with pytest.raises(openai.NotFoundError):
        _read(clients[0], "batch_unknown")
    with pytest.raises(openai.NotFoundError):  # another project's batch
        _read(_clients(replicas, "key-b")[0], a.id)
    wait_for(clients[0], a.id, TERMINAL, timeout=60)
    clients[0].delete(f"/batches/{a.id}", cast_to=httpx.Response)
    with pytest.raises(openai.NotFoundError):
        _read(clients[-1], a.id)
