"""Upstream engines against a fault-injecting fake upstream (harness/fake_upstream.py):
429 with Retry-After, 500, 503, dropped connections and stalls past the timeout are retried
until the line succeeds; a 400 is the line's answer and lands in the error file; a cancel
closes the connections of the requests in flight; a URL killed mid-batch leaves the rotation,
its lines go to the other URL, and it comes back once restarted. (A batchd killed mid-batch,
which resends what was in flight but writes every custom_id once, is the kill -9 harness in
tests/e2e/test_crash_recovery.py, which runs on this fake upstream.)"""

from __future__ import annotations

import json
import threading
import time

import httpx
import openai
import pytest

from harness.fake_fleet import FakeFleet, upstream_config
from harness.health import ADMIN_ENV, ADMIN_HEADERS
from harness.poll import wait_until
from tests.conftest import API_KEYS_ENV
from tests.support.batches import create, results_by_custom_id, wait_for

MODEL = "fake"


def line(custom_id: str, text: str) -> dict:
    return {
        "custom_id": custom_id,
        "method": "POST",
        "url": "/v1/chat/completions",
        "body": {"model": MODEL, "messages": [{"role": "user", "content": text}], "max_tokens": 4},
    }


@pytest.fixture(scope="module")
def fake(tmp_path_factory):
    fleet = FakeFleet(tmp_path_factory.mktemp("fake-upstream"), delay_ms=20).start()
    yield fleet
    fleet.stop()


@pytest.fixture(scope="module")
def upstream_server(start_app, fake, tmp_path_factory):
    config = upstream_config(
        tmp_path_factory.mktemp("upstream-config") / "models.json",
        {
            MODEL: {
                "model": fake.model,
                "timeout_s": 1.5,
                "deadline_s": 60,
                "health_interval_s": 0.5,
                "max_concurrency": 8,
            }
        },
    )
    # `--model NAME=URL` and `--config FILE`, as `batchd serve` takes them from the environment.
    env = {"BATCHD_MODELS": json.dumps([f"{MODEL}={fake.urls[0]}"]), "BATCHD_MODEL_CONFIG_FILE": str(config)}
    return start_app({"BATCHD_API_KEYS": API_KEYS_ENV, **ADMIN_ENV, **env}, models=True)


@pytest.fixture
def client(upstream_server) -> openai.OpenAI:
    return upstream_server.client("key-a")


def test_models_and_health_reflect_the_upstream(client, upstream_server, fake):
    assert [(m.id, m.engine_state) for m in client.models.list().data] == [(MODEL, "ready")]
    health = upstream_server.http.get("/health", headers=ADMIN_HEADERS).json()
    assert health["status"] == "ok"
    assert health["upstreams"][MODEL][fake.urls[0]]["state"] == "up"


def test_unknown_model_fails_validation(client):
    batch = create(client, [line("a", "hi") | {"body": {"model": "nope", "messages": []}}])
    batch = wait_for(client, batch.id)
    assert batch.status == "failed"
    assert batch.errors.data[0].code == "model_not_found"


def test_cancel_closes_the_requests_in_flight(client, fake):
    run = f"{time.monotonic_ns()}"
    before = fake.stats().get("closed_in_flight", 0)
    batch = create(client, [line(f"hold-{i}", f"plan:hold#{run}-{i}") for i in range(6)])
    wait_until(lambda: fake.stats().get("in_flight", 0) >= 6, 30, lambda: f"6 in flight: {fake.stats()}")
    client.batches.cancel(batch.id)
    batch = wait_for(client, batch.id, timeout=30)
    assert batch.status == "cancelled"
    wait_until(lambda: fake.stats().get("closed_in_flight", 0) - before >= 6, 10, lambda: f"6 closed: {fake.stats()}")
    assert fake.stats().get("in_flight", 0) == 0


def test_faults_are_retried_and_a_400_is_the_lines_answer(client, fake):
    run = f"{time.monotonic_ns()}"  # plans are counted per text: unique across backends
    plans = {
        "429": "429,ok",
        "503": "503,503,ok",
        "500": "500,ok",
        "reset": "reset,ok",
        "stall": "stall,ok",
        "mixed": "429,reset,500,ok",
        "ok": "ok",
    }
    lines = [line(f"{kind}-{i}", f"plan:{plan}#{run}-{kind}-{i}") for kind, plan in plans.items() for i in range(6)]
    lines += [line(f"bad-{i}", f"plan:400#{run}-{i}") for i in range(4)]
    before = fake.stats()
    batch = wait_for(client, create(client, lines).id, timeout=120)

    assert batch.status == "completed", batch
    output, errors = results_by_custom_id(client, batch)
    assert set(output) | set(errors) == {rec["custom_id"] for rec in lines}
    assert set(errors) == {f"bad-{i}" for i in range(4)}
    for record in errors.values():
        assert record["response"]["status_code"] == 400
        assert record["response"]["body"]["error"]["message"] == "fake 400"
        assert record["error"] is None
    for record in output.values():
        assert record["response"]["body"]["choices"][0]["message"]["content"] == "fake answer"
    assert batch.request_counts.completed == len(lines) - 4 and batch.request_counts.failed == 4
    after = fake.stats()
    for act in ("429", "503", "500", "reset", "stall"):
        assert after.get(f"act_{act}", 0) > before.get(f"act_{act}", 0), act
    assert batch.usage.input_tokens == 5 * (len(lines) - 4)


def test_a_killed_url_leaves_the_rotation_and_comes_back(start_app, tmp_path_factory):
    logs = tmp_path_factory.mktemp("fleet")
    a = FakeFleet(logs, delay_ms=40, max_concurrency=4).start()
    b = FakeFleet(logs, delay_ms=40, max_concurrency=4).start()
    config = upstream_config(
        logs / "models.json",
        {
            MODEL: {
                "urls": [*a.urls, *b.urls],
                "model": a.model,
                "max_concurrency": 4,
                "timeout_s": 5,
                "health_interval_s": 0.5,
            }
        },
    )
    server = start_app(
        {"BATCHD_API_KEYS": API_KEYS_ENV, "BATCHD_MODEL_CONFIG_FILE": str(config), **ADMIN_ENV}, models=True
    )
    client = server.client("key-a", max_retries=2)
    seen: list[str] = []
    done = threading.Event()

    def watch_b() -> None:
        while not done.is_set():
            try:
                state = server.http.get("/health", headers=ADMIN_HEADERS).json()
                seen.append(state["upstreams"][MODEL][b.urls[0]]["state"])
            except (httpx.HTTPError, KeyError, ValueError):
                pass
            time.sleep(0.1)

    watcher = threading.Thread(target=watch_b)
    watcher.start()
    try:
        lines = [line(f"l-{i}", f"hello {i}") for i in range(600)]
        batch = create(client, lines)
        wait_for(client, batch.id, until=lambda b_: b_.request_counts.completed > 60, timeout=60)
        b.kill()
        wait_until(lambda: "down" in seen, timeout=30, what="the killed URL leaving the rotation")
        b.start()
        batch = wait_for(client, batch.id, timeout=120)
        wait_until(lambda: seen[-1:] == ["up"], 10, "the restarted URL back in the rotation")
    finally:
        done.set()
        watcher.join()
        a.stop()
        b.stop()
    assert batch.status == "completed"
    output, errors = results_by_custom_id(client, batch)
    assert not errors and len(output) == 600
