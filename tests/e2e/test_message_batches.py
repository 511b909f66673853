"""Anthropic Message Batches through Anthropic's own client, run by the real engine on the
built-in chat model: the same scheduler, files and shards as OpenAI batches."""

from __future__ import annotations

import pytest

from harness.client import anthropic_client, openai_client
from harness.poll import wait_until
from tests.support.batches import CHAT_MODEL, chat_line, create, results_by_custom_id, wait_for
from tests.support.lazy import anthropic
from tests.support.metrics import scrape, value
from tests.support.webhook_receiver import WebhookReceiver

KEY = "key-msgbatch"
PROMPTS = [f"Tell me about item number {i}." for i in range(20)]
MAX_TOKENS = 8


def _params(i: int, **extra) -> dict:
    return {
        "model": CHAT_MODEL,
        "max_tokens": MAX_TOKENS,
        "temperature": 0,
        "messages": [{"role": "user", "content": PROMPTS[i % len(PROMPTS)]}],
        **extra,
    }


def _wait_ended(client: anthropic.Anthropic, batch_id: str, timeout: float = 300):
    return wait_until(
        lambda: (b := client.messages.batches.retrieve(batch_id)).processing_status == "ended" and b,
        timeout=timeout,
        what=f"message batch {batch_id} to end",
        interval=0.5,
    )


@pytest.fixture(scope="module")
def client(model_server) -> anthropic.Anthropic:
    return anthropic_client(model_server.base_url, KEY)


@pytest.fixture(scope="module")
def reference_texts(model_server) -> dict[str, str]:
    """What the engine answers each prompt at temperature 0, as the chat completion vLLM's
    Messages layer converts every Messages request into (run as an OpenAI batch)."""
    openai = openai_client(model_server.base_url, KEY)
    lines = [chat_line(prompt, prompt, max_tokens=MAX_TOKENS) for prompt in PROMPTS]
    done = wait_for(openai, create(openai, lines).id)
    assert done.status == "completed"
    output, _ = results_by_custom_id(openai, done)
    return {cid: line["response"]["body"]["choices"][0]["message"]["content"] for cid, line in output.items()}


@pytest.fixture(scope="module")
def ended_batch(client):
    """200 requests: one names a model that is not served, one lacks max_tokens."""
    requests = [{"custom_id": f"req-{i}", "params": _params(i)} for i in range(198)]
    requests.append({"custom_id": "unknown-model", "params": _params(0, model="no-such-model")})
    no_max_tokens = _params(1)
    del no_max_tokens["max_tokens"]
    requests.append({"custom_id": "no-max-tokens", "params": no_max_tokens})
    batch = client.messages.batches.create(requests=requests)
    assert batch.id.startswith("msgbatch_") and batch.type == "message_batch"
    assert batch.processing_status == "in_progress" and batch.results_url is None and batch.ended_at is None
    assert batch.request_counts.processing == 200
    return _wait_ended(client, batch.id)


def test_a_batch_ends_with_every_request_answered_as_the_messages_api_does(client, ended_batch, reference_texts):
    counts = ended_batch.request_counts
    assert (counts.processing, counts.succeeded, counts.errored, counts.canceled, counts.expired) == (0, 198, 2, 0, 0)
    assert ended_batch.ended_at >= ended_batch.created_at and ended_batch.expires_at > ended_batch.created_at
    assert ended_batch.results_url.endswith(f"/v1/messages/batches/{ended_batch.id}/results")

    results = list(client.messages.batches.results(ended_batch.id))
    by_id = {r.custom_id: r.result for r in results}
    assert len(results) == len(by_id) == 200
    for i in range(198):
        result = by_id[f"req-{i}"]
        assert result.type == "succeeded"
        message = result.message
        assert (message.type, message.role, message.model) == ("message", "assistant", CHAT_MODEL)
        assert [block.type for block in message.content] == ["text"]
        assert message.content[0].text == reference_texts[PROMPTS[i % len(PROMPTS)]]
        assert message.usage.output_tokens > 0
    unknown, no_max = by_id["unknown-model"], by_id["no-max-tokens"]
    assert unknown.type == "errored" and unknown.error.error.type == "not_found_error"
    assert "no-such-model" in unknown.error.error.message
    assert no_max.type == "errored" and no_max.error.error.type == "invalid_request_error"
    assert "max_tokens" in no_max.error.error.message


def test_a_request_list_anthropic_refuses_is_refused_at_create_and_nothing_is_stored(client):
    before = [b.id for b in client.messages.batches.list(limit=100)]
    refused = {
        "duplicate custom_id": [{"custom_id": "a", "params": _params(0)}, {"custom_id": "a", "params": _params(1)}],
        "no requests": [],
        "bad custom_id": [{"custom_id": "has spaces", "params": _params(0)}],
    }
    for case, requests in refused.items():
        with pytest.raises(anthropic.BadRequestError) as caught:
            client.messages.batches.create(requests=requests)
        body = caught.value.body
        assert body["type"] == "error" and body["error"]["type"] == "invalid_request_error", case
    assert [b.id for b in client.messages.batches.list(limit=100)] == before


def test_batches_list_newest_first_a_page_at_a_time(client, ended_batch):
    made = [client.messages.batches.create(requests=[{"custom_id": "x", "params": _params(0)}]).id for _ in range(3)]
    newest_first = made[::-1]
    first = client.messages.batches.list(limit=2)
    assert [b.id for b in first.data] == newest_first[:2] and first.has_more
    assert (first.first_id, first.last_id) == (newest_first[0], newest_first[1])
    everything = [b.id for b in client.messages.batches.list(limit=2)]  # the client follows after_id
    assert everything[:3] == newest_first and ended_batch.id in everything
    assert len(everything) == len(set(everything))
    newer = client.messages.batches.list(before_id=newest_first[2], limit=1)
    assert [b.id for b in newer.data] == [newest_first[1]] and newer.has_more
    for batch_id in made:
        _wait_ended(client, batch_id)


# Tens of seconds of work on the test model, so the batch is surely still running when the
# cancel arrives (600 short requests could all finish between two polls on a quiet host).
LONG_BATCH = 3000


def test_cancel_mid_run_ends_with_finished_requests_succeeded_and_the_rest_canceled(client):
    requests = [{"custom_id": f"c-{i}", "params": _params(i, max_tokens=128)} for i in range(LONG_BATCH)]
    batch = client.messages.batches.create(requests=requests)
    wait_until(
        lambda: client.messages.batches.retrieve(batch.id).request_counts.succeeded >= 20,
        timeout=120,
        what="some requests to finish",
        interval=0.2,
    )
    canceling = client.messages.batches.cancel(batch.id)
    assert canceling.processing_status in ("canceling", "ended") and canceling.cancel_initiated_at is not None
    ended = _wait_ended(client, batch.id)
    counts = ended.request_counts
    assert counts.succeeded >= 20 and counts.canceled > 0 and counts.errored == 0
    assert counts.succeeded + counts.canceled == LONG_BATCH and counts.processing == 0
    results = {r.custom_id: r.result.type for r in client.messages.batches.results(batch.id)}
    assert len(results) == LONG_BATCH
    assert sorted(results.values()).count("succeeded") == counts.succeeded
    assert sorted(results.values()).count("canceled") == counts.canceled
    # Cancelling an ended batch answers the batch as it is.
    assert client.messages.batches.cancel(batch.id).processing_status == "ended"


def test_delete_ended_batch_only(client, model_server):
    # As long as the cancel test's: one short request could end before the delete arrives (CI).
    requests = [{"custom_id": f"d-{i}", "params": _params(i, max_tokens=128)} for i in range(LONG_BATCH)]
    running = client.messages.batches.create(requests=requests)
    with pytest.raises(anthropic.BadRequestError):
        client.messages.batches.delete(running.id)
    client.messages.batches.cancel(running.id)
    _wait_ended(client, running.id)
    deleted = client.messages.batches.delete(running.id)
    assert (deleted.id, deleted.type) == (running.id, "message_batch_deleted")
    with pytest.raises(anthropic.NotFoundError) as caught:
        client.messages.batches.retrieve(running.id)
    assert caught.value.body["error"]["type"] == "not_found_error"


def test_keys_go_in_x_api_key_and_errors_in_anthropics_envelope(model_server):
    with pytest.raises(anthropic.AuthenticationError) as caught:
        anthropic_client(model_server.base_url, "wrong-key").messages.batches.list()
    assert caught.value.body["type"] == "error"
    assert caught.value.body["error"]["type"] == "authentication_error"
    bearer = anthropic.Anthropic(
        base_url=model_server.base_url.removesuffix("/v1"), auth_token=KEY, api_key=None, max_retries=0
    )
    assert bearer.messages.batches.list(limit=1).data is not None


def test_a_message_batch_ending_is_announced_by_webhook(client, model_server):
    openai = openai_client(model_server.base_url, KEY)
    with WebhookReceiver() as receiver:
        endpoint = openai.webhooks.create(url=receiver.url, name="message batches", event_types=["batch.completed"])
        try:
            batch = client.messages.batches.create(requests=[{"custom_id": "w", "params": _params(0)}])
            _wait_ended(client, batch.id)
            mine = wait_until(
                lambda: [e.type for e in receiver.events(endpoint.signing_secret) if e.data.id == batch.id],
                what="the batch's event",
            )
            assert mine == ["batch.completed"]
        finally:
            openai.webhooks.delete(endpoint.id)


def test_metrics_count_message_batch_requests_under_their_endpoint(model_server, ended_batch):
    # Only this module's batches run /v1/messages lines on the shared server.
    metrics = scrape(model_server)
    finished = {"model": CHAT_MODEL, "endpoint": "/v1/messages"}
    assert value(metrics, "batchd_lines_finished_total", **finished, outcome="completed") >= 198
    # The request without max_tokens failed on this model (the unknown model has its own label).
    assert value(metrics, "batchd_lines_finished_total", **finished, outcome="failed") >= 1
