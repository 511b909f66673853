"""Batches executed by the real vLLM engine on the built-in models, through the official client."""

from __future__ import annotations

import json
import os
import re
from pathlib import Path

import httpx
import openai
import psutil
import pytest

from app.core.statuses import EngineState
from harness.client import openai_client
from tests.support import db
from tests.support.batches import (
    CHAT_MODEL,
    EMBED_MODEL,
    cancel_in_cleanup,
    chat_line,
    create,
    embedding_line,
    read_lines,
    results_by_custom_id,
    wait_for,
)

SEEDS = Path(__file__).parents[1] / "fixtures" / "seeds"


def _line(custom_id: str, url: str, body: dict) -> dict:
    return {"custom_id": custom_id, "method": "POST", "url": url, "body": body}


@pytest.mark.parametrize("seed", sorted(p.name for p in SEEDS.glob("*.jsonl")))
def test_seed_example_files_complete(model_client, seed):
    data = (SEEDS / seed).read_bytes()
    inputs = [json.loads(line) for line in data.splitlines()]
    batch = create(model_client, data, endpoint=inputs[0]["url"])
    done = wait_for(model_client, batch.id)
    assert done.status == "completed", done.errors
    assert (done.request_counts.total, done.request_counts.completed, done.request_counts.failed) == (
        len(inputs),
        len(inputs),
        0,
    )
    assert done.error_file_id is None
    assert done.model == inputs[0]["body"]["model"]
    assert done.in_progress_at <= done.finalizing_at <= done.completed_at
    assert done.usage.input_tokens > 0
    output, errors = results_by_custom_id(model_client, done)
    assert set(output) == {line["custom_id"] for line in inputs} and errors == {}
    output_file = model_client.files.retrieve(done.output_file_id)
    assert (output_file.purpose, output_file.filename) == ("batch_output", f"{done.id}_output.jsonl")
    assert len({line["id"] for line in output.values()}) == len(output)
    for line in output.values():
        assert re.fullmatch(r"batch_req_[0-9a-f]{32}", line["id"]) and line["error"] is None
        response = line["response"]
        assert response["status_code"] == 200 and response["request_id"].startswith("req_")
        body = response["body"]
        if "chat" in seed:
            assert body["object"] == "chat.completion" and body["model"] == CHAT_MODEL
            assert body["choices"][0]["message"]["role"] == "assistant"
            assert body["usage"]["completion_tokens"] > 0
        elif "embeddings" in seed:
            assert body["object"] == "list" and len(body["data"][0]["embedding"]) == 384
        else:
            assert [d["index"] for d in body["data"]] == [0, 1]
            # Paris is the better answer to "What is the capital of France?".
            assert body["data"][1]["score"] > body["data"][0]["score"]
    expected_output_tokens = sum(
        rec["response"]["body"]["usage"].get("completion_tokens") or 0 for rec in output.values()
    )
    assert done.usage.output_tokens == expected_output_tokens


ENDPOINT_CASES = {
    "/v1/completions": (
        {"model": CHAT_MODEL, "prompt": "Once upon", "max_tokens": 5, "temperature": 0},
        lambda b: b["object"] == "text_completion" and b["usage"]["completion_tokens"] == 5,
    ),
    "/v1/responses": (
        {"model": CHAT_MODEL, "input": "Hello there", "max_output_tokens": 5, "temperature": 0},
        lambda b: b["object"] == "response" and b["status"] in ("completed", "incomplete"),
    ),
    "/v1/rerank": (
        {
            "model": EMBED_MODEL,
            "query": "capital of France",
            "documents": ["Paris is the capital of France.", "Bananas are yellow."],
        },
        lambda b: b["results"][0]["index"] == 0 and len(b["results"]) == 2,
    ),
    "/v1/embeddings": ({"model": EMBED_MODEL, "input": ["one", "two"]}, lambda b: len(b["data"]) == 2),
}


@pytest.mark.parametrize("endpoint", sorted(ENDPOINT_CASES))
def test_every_endpoint_runs(model_client, endpoint):
    body, check = ENDPOINT_CASES[endpoint]
    batch = create(model_client, [_line("only", endpoint, body)], endpoint=endpoint)
    done = wait_for(model_client, batch.id)
    assert done.status == "completed", done.errors
    output, _ = results_by_custom_id(model_client, done)
    assert check(output["only"]["response"]["body"]), output["only"]


def test_temperature_zero_is_deterministic(model_client):
    lines = [chat_line(f"same-{i}", "Tell me a story", max_tokens=16) for i in range(3)]
    done = wait_for(model_client, create(model_client, lines).id)
    output, _ = results_by_custom_id(model_client, done)
    contents = {o["response"]["body"]["choices"][0]["message"]["content"] for o in output.values()}
    assert len(contents) == 1


def test_mixed_batch_with_an_overlong_prompt_completes(model_client, model_server):
    too_long = " ".join(str(i) for i in range(4000))
    lines = [chat_line(f"ok-{i}") for i in range(5)] + [chat_line("too-long", too_long)]
    done = wait_for(model_client, create(model_client, lines).id)
    assert done.status == "completed"
    assert (done.request_counts.total, done.request_counts.completed, done.request_counts.failed) == (6, 5, 1)
    output, errors = results_by_custom_id(model_client, done)
    assert set(output) == {f"ok-{i}" for i in range(5)}
    assert set(errors) == {"too-long"}
    failure = errors["too-long"]
    assert failure["error"] is None
    assert failure["response"]["status_code"] == 400
    assert set(failure["response"]["body"]["error"]) >= {"message", "type", "param", "code"}
    assert (
        "context" in failure["response"]["body"]["error"]["message"].lower()
        or "length" in failure["response"]["body"]["error"]["message"].lower()
    )
    assert model_client.files.retrieve(done.error_file_id).filename == f"{done.id}_error.jsonl"
    # Both files were written to the server's store (the bucket, on the S3 backend).
    assert db.has_blob(model_server, "proj-a", done.output_file_id)
    assert db.has_blob(model_server, "proj-a", done.error_file_id)


def _long_lines(n: int, prefix: str = "slow", tokens: int = 200) -> list[dict]:
    return [chat_line(f"{prefix}-{i}", f"story number {i}", max_tokens=tokens, ignore_eos=True) for i in range(n)]


# Long enough (tens of seconds of work on the test model) that the batch is surely still running when the test acts on
# it: finished lines become visible in flushes, up to a second apart.
LONG_BATCH = 3000


def test_cancel_mid_run_keeps_finished_lines(model_client, model_server):
    batch = create(model_client, _long_lines(LONG_BATCH))
    try:
        running = wait_for(
            model_client, batch.id, statuses=(), timeout=120, until=lambda b: b.request_counts.completed >= 10
        )
        assert running.status == "in_progress", running
        response = httpx.delete(
            f"{model_server.base_url}/files/{batch.input_file_id}",
            headers={"Authorization": "Bearer key-a"},
            timeout=60,
        )
        # The input of a running batch stays.
        assert response.status_code == 409, (response.text, model_client.batches.retrieve(batch.id))
        cancelling = model_client.batches.cancel(batch.id)
        assert cancelling.status == "cancelling" and cancelling.cancelling_at is not None
        done = wait_for(model_client, batch.id, timeout=120)
        assert done.status == "cancelled" and done.cancelled_at is not None
        counts = done.request_counts
        assert counts.total == LONG_BATCH and counts.completed + counts.failed == LONG_BATCH
        assert 10 <= counts.completed < LONG_BATCH
        output, errors = results_by_custom_id(model_client, done)
        assert len(output) == counts.completed and len(errors) == counts.failed
        assert set(output) | set(errors) == {f"slow-{i}" for i in range(LONG_BATCH)}
        for line in errors.values():
            assert line["response"] is None
            assert line["error"] == {
                "code": "batch_cancelled",
                "message": "This request was not executed because the batch was cancelled.",
            }
        for line in output.values():
            assert line["response"]["status_code"] == 200
        with pytest.raises(openai.ConflictError) as info:
            model_client.batches.cancel(batch.id)
        assert info.value.body["message"] == "Cannot cancel a batch with status 'cancelled'."
    finally:
        cancel_in_cleanup(model_client, batch.id)  # a failed test leaves no 3000 lines running


def test_cancel_of_a_cancelling_batch_is_idempotent(model_client, model_server):
    batch = create(model_client, [chat_line("x")])
    wait_for(model_client, batch.id)
    # Pin the batch in `cancelling` under another worker's lease, so no worker finishes it.
    db.execute(
        model_server,
        "UPDATE batches SET status = 'cancelling', cancelling_at = 1, "
        "lease_owner = 'elsewhere', lease_expires_at = 1e12 WHERE id = :id",
        id=batch.id,
    )
    again = model_client.batches.cancel(batch.id)
    assert again.status == "cancelling" and again.cancelling_at == 1


def test_expiry_stops_the_batch_and_keeps_finished_lines(model_client):
    batch = create(model_client, _long_lines(LONG_BATCH, "exp"), window="3s")
    assert batch.expires_at - batch.created_at == 3
    done = wait_for(model_client, batch.id, timeout=120)
    assert done.status == "expired" and done.expired_at is not None
    counts = done.request_counts
    assert counts.total == LONG_BATCH and counts.completed + counts.failed == LONG_BATCH and counts.failed > 0
    output, errors = results_by_custom_id(model_client, done)
    assert len(output) == counts.completed
    assert set(output) | set(errors) == {f"exp-{i}" for i in range(LONG_BATCH)}
    for line in errors.values():
        assert line["response"] is None
        assert line["error"] == {
            "code": "batch_expired",
            "message": "This request could not be executed before the completion window expired.",
        }


def test_concurrent_batches_of_two_projects_share_the_engine(model_server, model_client):
    # The unit of fairness is the project (within one, the earliest deadline goes first).
    other = openai_client(model_server.base_url, "key-b")
    # A few seconds of work each (about five alone), not one: the first is surely still running
    # when the second starts, even when validating and claiming the second is slow.
    first = create(model_client, _long_lines(250, "first", tokens=100))
    second = create(other, _long_lines(250, "second", tokens=100))
    # Measure from the moment both batches are running (the second may start late on a busy
    # machine): from then on the second gets a fair share, it does not wait for the first.
    started = wait_for(other, second.id, until=lambda b: b.request_counts.completed >= 1)
    first_at_start = model_client.batches.retrieve(first.id).request_counts.completed
    first_done = wait_for(model_client, first.id)
    second_then = other.batches.retrieve(second.id).request_counts.completed
    first_gain = first_done.request_counts.completed - first_at_start
    second_gain = second_then - started.request_counts.completed
    # The first was still running then (a second that waits for the first starts after it), and
    # the second gained at least half as much, less the lines in flight: up to 16 (the engine's
    # slots) but at most a quarter of the first's gain, so the bound holds however small it is.
    assert first_gain > 0, (first_at_start, first_gain, second_gain)
    assert second_gain >= first_gain // 2 - min(16, first_gain // 4), (first_at_start, first_gain, second_gain)
    done = [first_done, wait_for(other, second.id)]
    assert [b.request_counts.completed for b in done] == [250, 250], [
        read_lines(client, b.error_file_id)[:2] for client, b in zip((model_client, other), done, strict=True)
    ]


def test_models_and_health(model_server, model_client):
    """Both engines are listed as ready, with room for lines, then the LoRA adapter on the chat
    engine, and /health says ok (with no upstreams: both run in-process); an unknown model is a 404."""
    models = model_client.models.list().data
    assert [(m.id, m.owned_by, m.engine_state) for m in models] == [
        (CHAT_MODEL, "batchd", EngineState.READY),
        (EMBED_MODEL, "batchd", EngineState.READY),
        ("tl", "batchd", EngineState.READY),
    ]
    assert all(m.max_lines_in_flight > 0 for m in models), models
    assert model_client.models.retrieve(CHAT_MODEL).id == CHAT_MODEL
    with pytest.raises(openai.NotFoundError):
        model_client.models.retrieve("no-such-model")
    health = httpx.get(model_server.base_url.replace("/v1", "/health"))
    assert (health.status_code, set(health.json()), health.json()["status"]) == (200, {"status", "replica"}, "ok")


def test_engine_processes_run_on_jemalloc(model_server):
    # glibc's malloc makes vLLM's CPU worker grow with every line (app/engine/local/allocator.py).
    engines = [
        p for p in psutil.Process(model_server.proc.pid).children(recursive=True) if p.name().startswith("VLLM::")
    ]
    assert {p.name() for p in engines} >= {"VLLM::EngineCore", "VLLM::Worker"}
    for process in engines:
        assert "libjemalloc" in Path(f"/proc/{process.pid}/maps").read_text(), process.name()


def test_engine_processes_run_below_the_api(model_server):
    # Every thread of vLLM's processes at the server's niceness + 10, so an API request's
    # wake-up preempts inference (app/engine/local/cpu_priority.py, bench/results/2026-11-24-load.md).
    server = psutil.Process(model_server.proc.pid)
    engines = [p for p in server.children(recursive=True) if p.name().startswith("VLLM::")]
    assert {p.name() for p in engines} >= {"VLLM::EngineCore", "VLLM::Worker"}
    expected = min(19, server.nice() + 10)
    for process in engines:
        threads = {t.id: os.getpriority(os.PRIO_PROCESS, t.id) for t in process.threads()}
        assert set(threads.values()) == {expected}, (process.name(), threads)
    assert server.nice() < expected  # the API process itself is left where it was


def test_embeddings_batch_outputs_are_in_input_order(model_client):
    lines = [embedding_line(f"e{i}", f"sentence {i}") for i in range(50)]
    done = wait_for(model_client, create(model_client, lines, endpoint="/v1/embeddings").id)
    assert [rec["custom_id"] for rec in read_lines(model_client, done.output_file_id)] == [f"e{i}" for i in range(50)]
