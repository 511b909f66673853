"""Batch lines carry vLLM's ``priority`` to an upstream fleet when the model's ``upstream:``
block says ``priority: true``: one value per batch, from its deadline, earlier deadlines
lower and every one behind online traffic's 0. With it off no line carries one. A fleet that
answers "Priority scheduling is not enabled" (older vLLM without --scheduling-policy
priority) still gets every line, without the field, and ``/health`` and the log say so.

One batchd serves three models: ``prio`` and ``plain`` on a fleet that records what it
receives, ``refusing`` (priority on) on a fleet that refuses a priority."""

from __future__ import annotations

import time

import httpx
import openai
import pytest

from app.pipeline.priority import deadline_priority
from harness.client import openai_client
from harness.fake_fleet import FakeFleet, upstream_config
from tests.conftest import API_KEYS_ENV
from tests.support.batches import create, results_by_custom_id, wait_for


def lines(model: str, tag: str, count: int) -> list[dict]:
    return [
        {
            "custom_id": f"{tag}-{i}",
            "method": "POST",
            "url": "/v1/chat/completions",
            "body": {"model": model, "messages": [{"role": "user", "content": f"{tag}-{i}"}], "max_tokens": 4},
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
def priority_server(start_server, recording, refusing, tmp_path_factory):
    common = {"health_interval_s": 0.5, "max_concurrency": 4}
    config = upstream_config(
        tmp_path_factory.mktemp("priority-config") / "models.json",
        {
            "prio": {"urls": recording.urls, "model": recording.model, "priority": True, **common},
            "plain": {"urls": recording.urls, "model": recording.model, **common},
            "refusing": {"urls": refusing.urls, "model": refusing.model, "priority": True, **common},
        },
    )
    return start_server({"BATCHD_API_KEYS": API_KEYS_ENV}, models=True, args=["--config", str(config)])


@pytest.fixture
def client(priority_server) -> openai.OpenAI:
    return openai_client(priority_server.base_url, "key-a")


def health(server) -> dict:
    return httpx.get(f"http://127.0.0.1:{server.port}/health", timeout=10).json()


def test_every_line_carries_its_batchs_deadline_and_earlier_deadlines_go_lower(client, recording, priority_server):
    run = time.monotonic_ns()
    day = create(client, lines("prio", f"day{run}", 12), window="24h")
    hour = create(client, lines("prio", f"hour{run}", 12), window="1h")
    day, hour = wait_for(client, day.id), wait_for(client, hour.id)
    assert (day.status, hour.status) == ("completed", "completed")

    received = recording.priorities()
    day_values = {received[f"day{run}-{i}"] for i in range(12)}
    hour_values = {received[f"hour{run}-{i}"] for i in range(12)}
    assert day_values == {deadline_priority(day.expires_at)}
    assert hour_values == {deadline_priority(hour.expires_at)}
    assert 0 < hour_values.pop() < day_values.pop()
    assert health(priority_server)["upstreams"]["prio"][recording.urls[0]]["priority"] == "on"


def test_with_priority_off_no_line_carries_one(client, recording, priority_server):
    run = time.monotonic_ns()
    batch = wait_for(client, create(client, lines("plain", f"plain{run}", 12)).id)
    assert batch.status == "completed"

    received = recording.priorities()
    assert [received[f"plain{run}-{i}"] for i in range(12)] == [None] * 12
    assert health(priority_server)["upstreams"]["plain"][recording.urls[0]]["priority"] == "off"


def test_a_fleet_that_refuses_priority_gets_the_lines_without_it(client, refusing, priority_server):
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
    assert priority_server.log().count("does not schedule by priority") == 1
