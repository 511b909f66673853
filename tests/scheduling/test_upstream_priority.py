"""Batch lines carry vLLM's ``priority`` to an upstream fleet when the model's ``upstream:``
block says ``priority: true``: the same value for every batch that is not at risk (so the
fleet serves them in the order batchd's fair gate admitted them, not by deadline across
projects), behind online traffic's 0. With it off no line carries one, and a tenant's own
``priority`` never reaches the fleet ahead of the batch range. A fleet that
answers "Priority scheduling is not enabled" (older vLLM without --scheduling-policy
priority) still gets every line, without the field, and ``/health`` and the log say so.

One batchd app (in process) serves three models: ``prio`` and ``plain`` on a fleet that records what it
receives, ``refusing`` (priority on) on a fleet that refuses a priority."""

from __future__ import annotations

import time

import openai
import pytest

from app.scheduling.fair_share import SMALL_BATCH_LINES
from app.scheduling.priority import AT_RISK_PRIORITY, BATCH_PRIORITY
from harness.fake_fleet import FakeFleet, upstream_config
from harness.health import ADMIN_ENV, ADMIN_HEADERS
from tests.conftest import API_KEYS_ENV
from tests.support.batches import create, results_by_custom_id, wait_for

TAG_KEYS = {"day": "key-a", "hour": "key-b", "pushy": "key-list"}


def lines(model: str, tag: str, count: int, **extra) -> list[dict]:
    return [
        {
            "custom_id": f"{tag}-{i}",
            "method": "POST",
            "url": "/v1/chat/completions",
            "body": {
                "model": model,
                "messages": [{"role": "user", "content": f"{tag}-{i}"}],
                "max_tokens": 4,
                **extra,
            },
        }
        for i in range(count)
    ]


@pytest.fixture(scope="module")
def recording(tmp_path_factory):
    fleet = FakeFleet(tmp_path_factory.mktemp("fleet-recording"), delay_ms=5, record_priority=True).start()
    yield fleet
    fleet.stop()


@pytest.fixture(scope="module")
def refusing(tmp_path_factory):
    fleet = FakeFleet(
        tmp_path_factory.mktemp("fleet-refusing"), delay_ms=5, record_priority=True, reject_priority=True
    ).start()
    yield fleet
    fleet.stop()


@pytest.fixture(scope="module")
def priority_server(start_app, recording, refusing, tmp_path_factory):
    common = {"health_interval_s": 0.5, "max_concurrency": 4}
    config = upstream_config(
        tmp_path_factory.mktemp("priority-config") / "models.json",
        {
            "prio": {"urls": recording.urls, "model": recording.model, "priority": True, **common},
            "plain": {"urls": recording.urls, "model": recording.model, **common},
            "refusing": {"urls": refusing.urls, "model": refusing.model, "priority": True, **common},
        },
    )
    return start_app(
        {"BATCHD_API_KEYS": API_KEYS_ENV, "BATCHD_MODEL_CONFIG_FILE": str(config), **ADMIN_ENV}, models=True
    )


@pytest.fixture
def client(priority_server) -> openai.OpenAI:
    return priority_server.client("key-a")


def health(server) -> dict:
    return server.http.get("/health", headers=ADMIN_HEADERS).json()


def test_every_batch_line_carries_the_batch_priority_whatever_its_deadline(client, recording, priority_server):
    # Three projects (within one, a 24h batch waits behind a 1h one at a priority of its own),
    # and batches past SMALL_BATCH_LINES (a small batch goes ahead on credit, at the at-risk
    # priority, once the scheduler has seen it: within a second, so only on a slow host).
    run, count = time.monotonic_ns(), SMALL_BATCH_LINES + 20
    clients = {tag: priority_server.client(key) for tag, key in TAG_KEYS.items()}
    day = create(clients["day"], lines("prio", f"day{run}", count), window="24h")
    hour = create(clients["hour"], lines("prio", f"hour{run}", count), window="1h")
    # A tenant naming its own priority gets the batch's, not its own.
    pushy = create(clients["pushy"], lines("prio", f"pushy{run}", count, priority=-100))
    done = [wait_for(clients[tag], batch.id) for tag, batch in (("day", day), ("hour", hour), ("pushy", pushy))]
    assert [b.status for b in done] == ["completed"] * 3

    received = recording.priorities()
    for tag in ("day", "hour", "pushy"):
        assert {received[f"{tag}{run}-{i}"] for i in range(count)} == {BATCH_PRIORITY}, tag
    assert BATCH_PRIORITY > 0
    assert health(priority_server)["upstreams"]["prio"][recording.urls[0]]["priority"] == "on"


def test_with_priority_off_a_tenants_own_priority_is_clamped_into_the_batch_range(client, recording):
    run = time.monotonic_ns()
    pushy = create(client, lines("plain", f"neg{run}", 6, priority=-100))
    modest = create(client, lines("plain", f"pos{run}", 6, priority=5000))
    assert wait_for(client, pushy.id).status == wait_for(client, modest.id).status == "completed"

    received = recording.priorities()
    assert [received[f"neg{run}-{i}"] for i in range(6)] == [AT_RISK_PRIORITY] * 6
    assert [received[f"pos{run}-{i}"] for i in range(6)] == [5000] * 6


def test_with_priority_off_no_line_carries_one(client, recording, priority_server):
    run = time.monotonic_ns()
    batch = wait_for(client, create(client, lines("plain", f"plain{run}", 12)).id)
    assert batch.status == "completed"

    received = recording.priorities()
    assert [received[f"plain{run}-{i}"] for i in range(12)] == [None] * 12
    assert health(priority_server)["upstreams"]["plain"][recording.urls[0]]["priority"] == "off"


def test_a_fleet_that_refuses_priority_gets_the_lines_without_it(client, refusing, priority_server, caplog):
    run = time.monotonic_ns()
    batch = wait_for(client, create(client, lines("refusing", f"ref{run}", 12)).id)

    assert batch.status == "completed"
    assert (batch.request_counts.completed, batch.request_counts.failed) == (12, 0)
    output, errors = results_by_custom_id(client, batch)
    assert len(output) == 12 and errors == {}
    received = refusing.priorities()
    assert [received[f"ref{run}-{i}"] for i in range(12)] == [None] * 12
    assert refusing.stats()["priority_refused"] >= 1
    assert health(priority_server)["upstreams"]["refusing"][refusing.urls[0]]["priority"] == "unsupported"
    assert caplog.text.count("does not schedule by priority") == 1
