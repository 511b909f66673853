"""Limits that cannot be walked around, against the app in process on upstream models (the fake
fleet, answering /tokenize with a token per character of the messages' text):

- Anthropic Message Batches count their prompt tokens against the project's enqueued-token
  limit per model, like OpenAI batches; a refused one ends with every request errored,
  `rate_limit_error`; their usage is booked under each request's own model.
- Two batches validated at once against a limit that fits one: exactly one fails.
- A failed /tokenize is retried with backoff; a line it still cannot count is estimated, and
  the next line asks /tokenize again.
- A project may be limited to some completion windows (`batchd projects set --completion-windows`).
- A LoRA adapter the fleet lists (`tl-up`, parent `chat-a`) is limited and booked under its own
  served name, apart from its base.
- A mixed-model batch's line on a model its project may not use fails alone."""

from __future__ import annotations

import openai
import pytest

from harness.db import database_url
from harness.fake_fleet import FakeFleet, upstream_config
from harness.poll import wait_until
from tests.conftest import API_KEYS_ENV
from tests.support import cli, db
from tests.support.batches import chat_lines, create, jsonl, results_by_custom_id, wait_for
from tests.support.lazy import anthropic

TOKEN_LIMIT = 500  # the server-wide default here
ADAPTER = "tl-up"  # a LoRA adapter the fake fleet lists on its model: served with parent chat-a
TEXT_100_TOKENS = "x" * 100  # 100 tokens by the fake /tokenize (a token a character), 25 estimated


@pytest.fixture(scope="module")
def setup(start_app, tmp_path_factory):
    tmp = tmp_path_factory.mktemp("limits")
    fleet = FakeFleet(tmp, tokenize_failures=0, loras=[ADAPTER]).start()
    # Its first 4 /tokenize requests fail: one line's 3 tries, then the next line's first.
    flaky = FakeFleet(tmp, tokenize_failures=4).start()
    slow = FakeFleet(tmp, delay_ms=2000, max_concurrency=1, tokenize_failures=0).start()
    config = upstream_config(
        tmp / "models.json",
        {
            "chat-a": {"urls": fleet.urls, "model": fleet.model},
            "chat-b": {"urls": fleet.urls, "model": fleet.model},
            "flaky-chat": {"urls": flaky.urls, "model": flaky.model},
            "slow-chat": {"urls": slow.urls, "model": slow.model, "max_concurrency": 1},
        },
    )
    server = start_app(
        {
            "BATCHD_API_KEYS": API_KEYS_ENV,
            "BATCHD_PROJECT_MAX_ENQUEUED_TOKENS": str(TOKEN_LIMIT),
            "BATCHD_MODEL_CONFIG_FILE": str(config),
        },
        models=True,
    )
    try:
        yield server, fleet, flaky
    finally:
        server.stop()
        for one in (fleet, flaky, slow):
            one.kill()


def _batchd(server, *args: str) -> str:
    return cli.batchd(server.data_dir, database_url(server), *args).stdout


def _request(custom_id: str, model: str, text: str = TEXT_100_TOKENS) -> dict:
    return {
        "custom_id": custom_id,
        "params": {"model": model, "max_tokens": 8, "messages": [{"role": "user", "content": text}]},
    }


def _ended(client: anthropic.Anthropic, batch_id: str):
    return wait_until(
        lambda: (b := client.messages.batches.retrieve(batch_id)).processing_status == "ended" and b,
        timeout=60,
        what=f"message batch {batch_id} to end",
        interval=0.2,
    )


def _results(client: anthropic.Anthropic, batch_id: str) -> dict[str, dict]:
    return {r.custom_id: r.result.model_dump() for r in client.messages.batches.results(batch_id)}


def _counted(server, batch_id: str) -> list[tuple]:
    return db.execute(
        server, "SELECT model, tokens FROM batch_prompt_tokens WHERE batch_id = :b ORDER BY model", b=batch_id
    )


def _prompt_tokens(server, batch_id: str) -> int:
    return db.execute(server, "SELECT prompt_tokens FROM batches WHERE id = :b", b=batch_id)[0][0]


def test_message_batch_of_a_closed_project_is_refused_every_request_rate_limited(setup):
    server, fleet, _ = setup
    client = server.anthropic("key-msgbatch")
    _batchd(server, "projects", "set", "proj-msgbatch", "--max-enqueued-tokens", "0")
    try:
        before = fleet.stats().get("requests", 0)
        batch = client.messages.batches.create(requests=[_request("r1", "chat-a"), _request("r2", "chat-b")])
        ended = _ended(client, batch.id)
        counts = ended.request_counts
        assert (counts.succeeded, counts.errored, counts.processing) == (0, 2, 0)
        results = _results(client, batch.id)
        assert set(results) == {"r1", "r2"}
        for result in results.values():
            assert result["type"] == "errored"
            assert result["error"]["type"] == "error"
            assert result["error"]["error"]["type"] == "rate_limit_error"
            assert result["error"]["error"]["message"].startswith(
                "Enqueued token limit reached for chat-a in project proj-msgbatch. Limit: 0 enqueued tokens."
            )
        assert fleet.stats().get("requests", 0) == before, "no request of the refused batch ran"
    finally:
        _batchd(server, "projects", "set", "proj-msgbatch", "--max-enqueued-tokens", "default")


def test_message_batch_tokens_and_usage_are_per_model(setup):
    server, _, _ = setup
    client = server.anthropic("key-a")
    # 300 tokens on each model: 600 in all, over the limit, but each model's count is under it.
    requests = [_request(f"a{i}", "chat-a") for i in range(3)] + [_request(f"b{i}", "chat-b") for i in range(3)]
    both = client.messages.batches.create(requests=requests)
    assert _ended(client, both.id).request_counts.succeeded == 6
    # The fake fleet answers 5 input and 2 output tokens a request: booked under each one's model.
    usage = db.execute(
        server,
        "SELECT model, SUM(requests), SUM(input_tokens), SUM(output_tokens) FROM usage_minutes "
        "WHERE batch_id = :b GROUP BY model ORDER BY model",
        b=both.id,
    )
    assert [tuple(int(v) if not isinstance(v, str) else v for v in row) for row in usage] == [
        ("chat-a", 3, 15, 6),
        ("chat-b", 3, 15, 6),
    ]

    # 600 tokens on the second model: refused, naming it, though the first model's 100 fit.
    over = client.messages.batches.create(
        requests=[_request("a", "chat-a")] + [_request(f"b{i}", "chat-b") for i in range(6)]
    )
    assert _ended(client, over.id).request_counts.errored == 7
    [message] = {r["error"]["error"]["message"] for r in _results(client, over.id).values()}
    assert message.startswith("Enqueued token limit reached for chat-b in project proj-a. Limit: 500 enqueued tokens.")
    assert _counted(server, over.id) == []
    assert _counted(server, both.id) == [("chat-a", 300), ("chat-b", 300)]


def test_an_adapter_is_limited_and_booked_under_its_own_name(setup):
    server, _, _ = setup
    client = server.anthropic("key-b")
    assert server.client("key-b").models.retrieve(ADAPTER).parent == "chat-a"
    # 300 tokens on the base and 300 on its adapter: each under the limit, though 600 in all.
    requests = [_request(f"a{i}", "chat-a") for i in range(3)] + [_request(f"t{i}", ADAPTER) for i in range(3)]
    both = client.messages.batches.create(requests=requests)
    assert _ended(client, both.id).request_counts.succeeded == 6
    usage = db.execute(
        server,
        "SELECT model, SUM(requests) FROM usage_minutes WHERE batch_id = :b GROUP BY model ORDER BY model",
        b=both.id,
    )
    assert [(model, int(n)) for model, n in usage] == [("chat-a", 3), (ADAPTER, 3)]
    assert _counted(server, both.id) == [("chat-a", 300), (ADAPTER, 300)]

    # 600 tokens on the adapter: refused, naming it, though its base's 100 fit.
    over = client.messages.batches.create(
        requests=[_request("a", "chat-a")] + [_request(f"t{i}", ADAPTER) for i in range(6)]
    )
    assert _ended(client, over.id).request_counts.errored == 7
    [message] = {r["error"]["error"]["message"] for r in _results(client, over.id).values()}
    assert message.startswith(f"Enqueued token limit reached for {ADAPTER} in project proj-b.")


def test_batches_validated_at_once_against_a_limit_that_fits_one(setup):
    server, _, _ = setup
    client = server.client("key-load", max_retries=2)
    # 300 tokens each on the slow model (its lines stay enqueued): the limit fits one.
    files = [
        client.files.create(file=(f"{n}.jsonl", jsonl(chat_lines(3, "slow-chat", n, TEXT_100_TOKENS))), purpose="batch")
        for n in "xy"
    ]
    batches = [
        client.batches.create(input_file_id=f.id, endpoint="/v1/chat/completions", completion_window="24h")
        for f in files
    ]
    settled = [wait_for(client, b.id, statuses={"in_progress", "failed"}, timeout=60) for b in batches]
    assert sorted(b.status for b in settled) == ["failed", "in_progress"], settled
    [failed] = [b for b in settled if b.status == "failed"]
    assert [e.code for e in failed.errors.data] == ["token_limit_exceeded"]


def test_a_failed_tokenize_is_retried_and_falls_back_for_that_line_only(setup):
    server, _, flaky = setup
    client = server.client("key-list", max_retries=2)
    text = "y" * 40  # 40 tokens by /tokenize, 10 estimated
    # Its line's three tries all fail: estimated.
    first = wait_for(client, create(client, chat_lines(1, "flaky-chat", "first", text)).id, timeout=60)
    # Its line's first try fails (the fleet's 4th failure), the retry counts it.
    second = wait_for(client, create(client, chat_lines(1, "flaky-chat", "second", text)).id, timeout=60)
    assert (first.status, second.status) == ("completed", "completed")
    assert _prompt_tokens(server, first.id) == 10
    assert _prompt_tokens(server, second.id) == 40
    stats = flaky.stats()
    assert (stats.get("tokenize_failed"), stats.get("tokenize_ok")) == (4, 1)


def test_a_project_limited_to_some_completion_windows(setup):
    server, _, _ = setup
    limited = server.client("key-b", max_retries=2)
    other = server.client("key-hooks", max_retries=2)
    assert _batchd(server, "projects", "set", "proj-b", "--completion-windows", "24h").endswith(
        "\tcompletion windows 24h\tretention days none\n"
    )
    try:
        file = limited.files.create(file=("w.jsonl", jsonl(chat_lines(1, "chat-a", "w", "hi"))), purpose="batch")
        with pytest.raises(openai.BadRequestError) as refused:
            limited.batches.create(input_file_id=file.id, endpoint="/v1/chat/completions", completion_window="1h")
        body = refused.value.body
        assert refused.value.status_code == 400
        assert (body["type"], body["param"], body["code"]) == (
            "invalid_request_error",
            "completion_window",
            "invalid_value",
        )
        assert body["message"] == ("Invalid value for 'completion_window': '1h'. Project 'proj-b' may use only: '24h'.")
        assert (
            limited.batches.create(
                input_file_id=file.id, endpoint="/v1/chat/completions", completion_window="24h"
            ).completion_window
            == "24h"
        )
        # Another project keeps every window the server offers.
        other_file = other.files.create(file=("w.jsonl", jsonl(chat_lines(1, "chat-a", "w", "hi"))), purpose="batch")
        assert (
            other.batches.create(
                input_file_id=other_file.id, endpoint="/v1/chat/completions", completion_window="1h"
            ).completion_window
            == "1h"
        )
    finally:
        _batchd(server, "projects", "set", "proj-b", "--completion-windows", "default")
    assert (
        limited.batches.create(
            input_file_id=file.id, endpoint="/v1/chat/completions", completion_window="1h"
        ).completion_window
        == "1h"
    )


def test_mixed_model_batch_runs_each_line_on_its_model(setup):
    """`allow_mixed_models`: lines of two served models and an adapter each run on their own model,
    booked under it; a line naming a model not served fails alone. Without it: `model_mismatch`."""
    server, _, _ = setup
    client = server.client("key-a", max_retries=2)
    models = {"m1": "chat-a", "m2": "chat-b", "m3": ADAPTER, "m4": "no-such-model"}
    lines = [
        {
            "custom_id": custom_id,
            "method": "POST",
            "url": "/v1/chat/completions",
            "body": {"model": model, "max_tokens": 4, "messages": [{"role": "user", "content": "hi"}]},
        }
        for custom_id, model in models.items()
    ]
    plain = wait_for(client, create(client, lines).id)
    assert plain.status == "failed"
    assert [(e.code, e.line) for e in plain.errors.data] == [("model_mismatch", 2), ("model_mismatch", 4)]
    assert plain.model_extra.get("allow_mixed_models") is None

    created = create(client, lines, extra_body={"allow_mixed_models": True})
    assert created.model_extra["allow_mixed_models"] is True
    batch = wait_for(client, created.id)
    assert batch.status == "completed", batch.errors
    assert (batch.model, batch.request_counts.completed, batch.request_counts.failed) == ("chat-a", 3, 1)
    output, errors = results_by_custom_id(client, batch)
    assert sorted(output) == ["m1", "m2", "m3"]
    assert all(output[c]["response"]["status_code"] == 200 for c in output)
    assert list(errors) == ["m4"]
    assert errors["m4"]["response"]["status_code"] == 404
    assert errors["m4"]["response"]["body"]["error"]["code"] == "model_not_found"
    usage = db.execute(
        server,
        "SELECT model, SUM(requests) FROM usage_minutes WHERE batch_id = :b AND model != :m GROUP BY model ORDER BY model",
        b=batch.id,
        m="no-such-model",
    )
    assert [(model, int(n)) for model, n in usage] == [("chat-a", 1), ("chat-b", 1), (ADAPTER, 1)]


def test_a_mixed_batch_line_on_a_model_the_project_may_not_use_fails_alone(setup):
    """A project denied `chat-b`: in a mixed batch, its `chat-b` line fails as OpenAI answers a
    model one may not use (404 `model_not_found`) and never reaches the engines; the `chat-a`
    line completes."""
    server, _, _ = setup
    _batchd(server, "projects", "set", "proj-batch-list", "--max-enqueued-tokens", "default")  # its row
    denied = db.execute(
        server,
        "UPDATE projects SET model_permissions_mode = 'deny_list', model_ids = :ids WHERE name = :p RETURNING name",
        ids='["chat-b"]',
        p="proj-batch-list",
    )
    assert denied == [("proj-batch-list",)]
    client = server.client("key-batch-list", max_retries=2)
    lines = [
        {
            "custom_id": custom_id,
            "method": "POST",
            "url": "/v1/chat/completions",
            "body": {"model": model, "max_tokens": 4, "messages": [{"role": "user", "content": "hi"}]},
        }
        for custom_id, model in (("allowed", "chat-a"), ("denied", "chat-b"))
    ]
    batch = wait_for(client, create(client, lines, extra_body={"allow_mixed_models": True}).id)
    assert batch.status == "completed", batch.errors
    assert (batch.request_counts.completed, batch.request_counts.failed) == (1, 1)
    output, errors = results_by_custom_id(client, batch)
    assert list(output) == ["allowed"] and output["allowed"]["response"]["status_code"] == 200
    assert list(errors) == ["denied"]
    assert errors["denied"]["response"]["status_code"] == 404
    assert errors["denied"]["response"]["body"]["error"]["code"] == "model_not_found"
    usage = db.execute(
        server, "SELECT model, SUM(requests) FROM usage_minutes WHERE batch_id = :b GROUP BY model", b=batch.id
    )
    assert [(model, int(n)) for model, n in usage] == [("chat-a", 1)]
