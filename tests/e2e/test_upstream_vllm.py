"""Upstream engines in front of real `vllm serve` processes (the tiny chat model and MiniLM
with the pooling runner): batchd starts no engine of its own, a chat batch and an embeddings
batch complete through it, and each output body is what the upstream answers when called
directly with the same request (ids and timestamps aside). Both batchd and the chat upstream
export traces to the session's OTLP receiver: vLLM's request spans join the batch's trace."""

from __future__ import annotations

import json
import math

import httpx
import pytest

from harness.client import anthropic_client, openai_client
from harness.poll import wait_until
from tests.conftest import API_KEYS_ENV
from tests.support import db, vllm_upstreams
from tests.support.batches import (
    CHAT_MODEL,
    EMBED_MODEL,
    chat_line,
    create,
    embedding_line,
    results_by_custom_id,
    wait_for,
)
from tests.support.otlp import check_batch_trace, shared_receiver

# Fields that differ between two answers to the same request.
VOLATILE = {"id", "created"}


# The session's `vllm serve` pair: the `vllm_servers` fixture (tests/conftest.py).
vllm_upstreams.register(__file__)


@pytest.fixture(scope="module")
def batchd(start_server, vllm_servers):
    chat, embed = vllm_servers
    # At INFO, where an in-process engine logs "Engine for <model> ready" (app/engine/launch.py).
    # A token limit no batch reaches: every batch's prompt tokens are counted (by /tokenize).
    server = start_server(
        {
            "BATCHD_API_KEYS": API_KEYS_ENV,
            "BATCHD_LOG_LEVEL": "info",
            "BATCHD_PROJECT_MAX_ENQUEUED_TOKENS": str(10**12),
            # Every line gets a span, whose traceparent goes to the upstream.
            "BATCHD_TRACE_LINE_SAMPLE": "1",
            **shared_receiver().server_env(),
        },
        models=True,
        args=["--model", f"{CHAT_MODEL}={chat.url}", "--model", f"{EMBED_MODEL}={embed.url}"],
    )
    log = server.log()
    (ready,) = [line for line in log.splitlines() if "ready: serving" in line]
    assert sorted(ready.split("ready: serving ")[1].split(", ")) == sorted([CHAT_MODEL, EMBED_MODEL])
    assert "Engine for" not in log
    return server


@pytest.fixture(scope="module")
def client(batchd):
    return openai_client(batchd.base_url, "key-a")


def direct(url: str, endpoint: str, body: dict) -> dict:
    response = httpx.post(url + endpoint.removeprefix("/v1"), json=body, timeout=60)
    assert response.status_code == 200, response.text
    return response.json()


def run_through_batchd(client, lines: list[dict], endpoint: str) -> tuple[dict, object]:
    """Run ``lines`` as one batch; (the output bodies by custom_id, the batch) (every line must succeed)."""
    batch = wait_for(client, create(client, lines, endpoint=endpoint).id, timeout=240)
    assert batch.status == "completed", batch
    output, errors = results_by_custom_id(client, batch)
    assert not errors and len(output) == len(lines)
    return {custom_id: record["response"]["body"] for custom_id, record in output.items()}, batch


def counted_prompt_tokens(server, batch) -> int:
    """The prompt tokens validation counted for the batch (the enqueued-token limit's)."""
    [(counted,)] = db.execute(server, "SELECT prompt_tokens FROM batches WHERE id = :b", b=batch.id)
    return counted


def test_models_lists_the_upstream_models(client):
    assert sorted(m.id for m in client.models.list().data) == sorted([CHAT_MODEL, EMBED_MODEL])


def test_chat_batch_matches_the_upstream(batchd, client, vllm_servers):
    lines = [chat_line(f"c-{i}", f"Say something about number {i}", max_tokens=12) for i in range(12)]
    output, batch = run_through_batchd(client, lines, "/v1/chat/completions")
    for source in lines[:4]:
        got = output[source["custom_id"]]
        want = direct(vllm_servers[0].url, source["url"], source["body"])
        assert {k: v for k, v in got.items() if k not in VOLATILE} == {
            k: v for k, v in want.items() if k not in VOLATILE
        }
    assert batch.usage.output_tokens == sum(body["usage"]["completion_tokens"] for body in output.values())
    # Counted at validation by the upstream's /tokenize: exactly the prompts the upstream then ran.
    assert counted_prompt_tokens(batchd, batch) == batch.usage.input_tokens > 0


def test_embeddings_batch_matches_the_upstream(batchd, client, vllm_servers):
    lines = [embedding_line(f"e-{i}", f"sentence number {i} to embed") for i in range(12)]
    output, batch = run_through_batchd(client, lines, "/v1/embeddings")
    assert counted_prompt_tokens(batchd, batch) == batch.usage.input_tokens > 0
    for source in lines[:4]:
        got = output[source["custom_id"]]
        want = direct(vllm_servers[1].url, source["url"], source["body"])
        assert got["usage"] == want["usage"] and got["model"] == want["model"]
        # Floats of one input can differ in the last bits with what it was batched with.
        assert all(
            math.isclose(a, b, abs_tol=1e-5)
            for a, b in zip(got["data"][0]["embedding"], want["data"][0]["embedding"], strict=True)
        )


def test_message_batch_matches_the_upstreams_messages_api(client, vllm_servers):
    """Message Batch requests go to the upstream's `/v1/messages`; each message is what
    `vllm serve` answers there for the same params (ids aside)."""
    messages = anthropic_client(str(client.base_url).rstrip("/"), "key-a")
    params = [
        {
            "model": CHAT_MODEL,
            "max_tokens": 12,
            "temperature": 0,
            "messages": [{"role": "user", "content": f"Say something about number {i}"}],
        }
        for i in range(8)
    ]
    requests = [{"custom_id": f"m-{i}", "params": p} for i, p in enumerate(params)]
    requests.append({"custom_id": "unknown", "params": {**params[0], "model": "no-such-model"}})
    batch = messages.messages.batches.create(requests=requests)
    wait_until(
        lambda: messages.messages.batches.retrieve(batch.id).processing_status == "ended",
        timeout=240,
        what="the message batch to end",
        interval=0.5,
    )
    results = {r.custom_id: r.result for r in messages.messages.batches.results(batch.id)}
    assert results["unknown"].type == "errored" and results["unknown"].error.error.type == "not_found_error"
    # The raw lines, to compare with the upstream's JSON as it is.
    ended = messages.messages.batches.retrieve(batch.id)
    raw = httpx.get(ended.results_url, headers={"x-api-key": "key-a"}, timeout=30)
    lines = {line["custom_id"]: line["result"] for line in map(json.loads, raw.text.splitlines())}
    for i, body in enumerate(params[:4]):
        got = lines[f"m-{i}"]
        assert got["type"] == "succeeded"
        want = direct(vllm_servers[0].url, "/v1/messages", body)
        assert {k: v for k, v in got["message"].items() if k != "id"} == {k: v for k, v in want.items() if k != "id"}


def test_a_batch_is_one_trace_that_the_upstreams_spans_join(batchd, client):
    """One trace per batch: the create request, validation, shards, finalize, a span per line,
    and under each line vLLM's own request span (batchd sent the line span's traceparent)."""
    lines = [chat_line(f"t-{i}", f"Trace number {i}", max_tokens=4) for i in range(4)]
    _, batch = run_through_batchd(client, lines, "/v1/chat/completions")
    receiver = shared_receiver()
    spans = receiver.batch_trace(batch.id)
    by_name = check_batch_trace([s for s in spans if s.service == "batchd"], batch.id, "proj-a", CHAT_MODEL)
    line_spans = by_name["batchd.line"]
    assert sorted(s.attributes["batchd.custom_id"] for s in line_spans) == [f"t-{i}" for i in range(4)]
    shard_ids = {s.span_id for s in by_name["batchd.shard"]}
    assert all(s.parent_id in shard_ids for s in line_spans)
    # vLLM exports its request span a moment after answering.
    upstream = wait_until(
        lambda: len(found := [s for s in receiver.trace(spans[0].trace_id) if s.service == "vllm"]) >= 4 and found,
        timeout=30,
        what="vLLM's request spans in the batch's trace",
    )
    assert sorted(s.parent_id for s in upstream) == sorted(s.span_id for s in line_spans)
    # Log lines carry the trace id (the shard that ends the batch logs it at INFO).
    assert f"trace={spans[0].trace_id} batch {batch.id}: every shard done" in batchd.log()
