"""`POST /v1/batches/estimate` on the fake engine, in process: a quote of a batch's lines, tokens,
output bound, cost and projected finish that creates nothing and holds no quota; create's
4xx errors and a failed batch's line errors; later when the project's earlier work is queued."""

from __future__ import annotations

import json
import threading
from concurrent.futures import ThreadPoolExecutor

import openai
import pytest

from app.engine.prompt_tokens import estimate_all
from harness.poll import wait_until
from tests.conftest import API_KEYS_ENV
from tests.support import db
from tests.support.batches import CHAT_MODEL, cancel_in_cleanup, chat_line, create, upload, wait_for
from tests.support.fake_engine import FakeEngines

CHAT = "/v1/chat/completions"
CONTEXT = 2048
PRICES = {"input": 0.15, "output": 0.6}


def _estimate(client: openai.OpenAI, file_id: str, window: str = "24h", **body) -> dict:
    body = {"input_file_id": file_id, "endpoint": CHAT, "completion_window": window, **body}
    return client.post("/batches/estimate", body=body, cast_to=object)


def _batch_ids(client: openai.OpenAI) -> list[str]:
    return [b.id for b in client.batches.list(limit=100)]


@pytest.fixture(scope="module")
def measured(fake_server):
    """A chat batch that ran for a few seconds (its lines held), so the model has a throughput."""
    client = fake_server.client("key-b")
    engines = fake_server.engines
    engines.hold()
    timer = threading.Timer(2.5, engines.release)
    try:
        batch = create(client, [chat_line(f"held-{i}", "fake:hold") for i in range(20)])
        # Held 2.5 s from when it runs, not from the create (a loaded host can spend that uploading).
        wait_for(client, batch.id, until=lambda b: b.status == "in_progress", timeout=60)
        timer.start()
        done = wait_for(client, batch.id, timeout=60)
    finally:
        timer.cancel()
        engines.hold()
    assert done.status == "completed" and done.finalizing_at - done.in_progress_at >= 2
    return done


def test_a_quote_of_300_lines_creates_nothing(fake_client, measured):
    lines = [chat_line(f"q-{i}", f"question {i}", max_tokens=1 + i % 7) for i in range(300)]
    file = upload(fake_client, lines)
    before = _batch_ids(fake_client)
    quote = _estimate(fake_client, file.id)
    assert _batch_ids(fake_client) == before
    assert quote["object"] == "batch.estimate" and quote["errors"] is None
    assert (quote["input_file_id"], quote["endpoint"], quote["model"]) == (file.id, CHAT, CHAT_MODEL)
    assert quote["lines"] == 300
    assert quote["input_tokens"] == sum(estimate_all(CHAT, [line["body"] for line in lines])) > 0
    assert quote["max_output_tokens"] == sum(line["body"]["max_tokens"] for line in lines)
    assert quote["cost"] is None  # the fake server prices no model
    assert quote["lines_per_second"] > 0
    assert quote["projected_start_at"] <= quote["projected_finish_at"] < quote["expires_at"]
    assert quote["feasible"] is True and quote["at_risk"] is False
    # The batch itself reports the same input tokens.
    done = wait_for(fake_client, create(fake_client, lines).id, timeout=60)
    assert done.status == "completed" and done.usage.input_tokens == quote["input_tokens"]


def test_line_errors_are_a_failed_batchs(fake_client):
    lines = [chat_line("a"), chat_line("a"), chat_line("other", model="unknown-model")]
    data = b"".join(json.dumps(line).encode() + b"\n" for line in lines) + b"not json\n"
    file = upload(fake_client, data)
    quote = _estimate(fake_client, file.id)
    assert (quote["lines"], quote["input_tokens"], quote["max_output_tokens"], quote["cost"]) == (None,) * 4
    failed = wait_for(
        fake_client, fake_client.batches.create(input_file_id=file.id, endpoint=CHAT, completion_window="24h").id
    )
    assert failed.status == "failed"
    assert quote["errors"] == failed.errors.model_dump()
    assert [(e["code"], e["line"]) for e in quote["errors"]["data"]][:1] == [("duplicate_custom_id", 2)]


def test_create_errors_are_creates(fake_client):
    body = {"input_file_id": "file-missing", "endpoint": CHAT, "completion_window": "24h"}
    for path in ("/batches", "/batches/estimate"):
        with pytest.raises(openai.NotFoundError) as missing:
            fake_client.post(path, body=body, cast_to=object)
        assert missing.value.body["param"] == "input_file_id"
        with pytest.raises(openai.BadRequestError) as window:
            fake_client.post(path, body={**body, "completion_window": "2d"}, cast_to=object)
        assert window.value.body["param"] == "completion_window"
    user_data = fake_client.files.create(file=("x.jsonl", b"{}\n"), purpose="user_data")
    with pytest.raises(openai.BadRequestError) as purpose:
        _estimate(fake_client, user_data.id)
    assert "purpose 'batch'" in purpose.value.body["message"]


def test_the_projects_queued_work_puts_the_finish_later(fake_server, measured):
    client = fake_server.client("key-load")
    file = upload(client, [chat_line(f"n-{i}") for i in range(50)])
    alone = _estimate(client, file.id)
    assert alone["projected_finish_at"] is not None
    fake_server.engines.hold()
    queued = create(client, [chat_line(f"long-{i}", "fake:hold") for i in range(600)])
    try:
        wait_for(client, queued.id, statuses=("in_progress",), timeout=30)
        behind = _estimate(client, file.id)
    finally:
        cancel_in_cleanup(client, queued.id)
    assert behind["projected_start_at"] > alone["projected_start_at"]
    assert behind["projected_finish_at"] > alone["projected_finish_at"]


@pytest.fixture(scope="module")
def priced(start_app, tmp_path_factory):
    """An app whose config prices the chat model and sets its context length, at most one
    active batch a project."""
    config = tmp_path_factory.mktemp("estimate") / "models.json"
    config.write_text(json.dumps({"models": {CHAT_MODEL: {"pricing": PRICES, "max_model_len": CONTEXT}}}))
    env = {
        "BATCHD_API_KEYS": API_KEYS_ENV,
        "BATCHD_MODEL_CONFIG_FILE": str(config),
        "BATCHD_PROJECT_MAX_ACTIVE_BATCHES": "1",
    }
    return start_app(env, engines=FakeEngines())


def test_cost_and_the_context_bound_and_no_quota_held(priced):
    client = priced.client("key-a")
    capped, uncapped = chat_line("capped", max_tokens=100), chat_line("uncapped")
    del uncapped["body"]["max_tokens"]
    file = upload(client, [capped, uncapped])
    quote = _estimate(client, file.id)
    quote = _estimate(client, file.id)  # a second quote: the first held no active-batch slot
    prompt = estimate_all(CHAT, [uncapped["body"]])[0]
    assert quote["max_output_tokens"] == 100 + CONTEXT - prompt
    # List prices less the default batch discount (half), as the Costs API prices usage.
    input_cost = quote["input_tokens"] * PRICES["input"] / 1e6 / 2
    output_cost = quote["max_output_tokens"] * PRICES["output"] / 1e6 / 2
    assert quote["cost"] == pytest.approx(
        {"input": input_cost, "output": output_cost, "total": input_cost + output_cost, "currency": "usd"}
    )
    # Nothing has run on this app: no rate, so nothing is projected.
    nothing = ("lines_per_second", "projected_start_at", "projected_finish_at", "feasible", "at_risk")
    assert [quote[key] for key in nothing] == [None] * 5
    assert db.execute(priced, "SELECT count(*) FROM batches")[0][0] == 0
    assert client.batches.create(input_file_id=file.id, endpoint=CHAT, completion_window="24h").id


# Enqueued tokens a project may hold; chat_line's lines are about 3 prompt tokens each.
TOKEN_LIMIT = 100


@pytest.fixture(scope="module")
def limited(start_app):
    env = {"BATCHD_API_KEYS": API_KEYS_ENV, "BATCHD_PROJECT_MAX_ENQUEUED_TOKENS": str(TOKEN_LIMIT)}
    return start_app(env, engines=FakeEngines())


def _tokens(lines: list[dict]) -> int:
    return sum(estimate_all(CHAT, [line["body"] for line in lines]))


def _limit_error(quote: dict) -> dict:
    assert quote["feasible"] is False and quote["errors"] is not None, quote
    [error] = quote["errors"]["data"]
    return error


def test_a_batch_past_the_enqueued_token_limit_is_quoted_infeasible_and_fails_so(limited):
    client = limited.client("key-a")
    lines = [chat_line(f"big-{i}", f"question {i}") for i in range(40)]
    assert _tokens(lines) > TOKEN_LIMIT
    file = upload(client, lines)
    quote = _estimate(client, file.id)
    error = _limit_error(quote)
    assert error["code"] == "token_limit_exceeded" and (error["line"], error["param"]) == (None, None)
    assert f"Limit: {TOKEN_LIMIT:,} enqueued tokens" in error["message"]
    # The file itself is valid: its counts are said; no projection of a batch that cannot run.
    assert (quote["lines"], quote["input_tokens"]) == (40, _tokens(lines))
    assert quote["projected_finish_at"] is None and quote["at_risk"] is None
    failed = wait_for(client, client.batches.create(input_file_id=file.id, endpoint=CHAT, completion_window="24h").id)
    assert failed.status == "failed"
    assert failed.errors is not None and failed.errors.model_dump() == quote["errors"]


def test_the_projects_enqueued_batches_count_against_the_quote(limited):
    client = limited.client("key-b")
    engines = limited.engines
    lines = [chat_line(f"fits-{i}", f"question {i}") for i in range(15)]
    held_lines = [chat_line(f"held-{i}", "fake:hold") for i in range(20)]
    assert _tokens(lines) <= TOKEN_LIMIT < _tokens(lines) + _tokens(held_lines)
    file = upload(client, lines)
    assert _estimate(client, file.id)["errors"] is None  # alone it fits
    engines.hold()
    held = create(client, held_lines)
    try:
        wait_for(client, held.id, statuses=("in_progress",), timeout=30)
        quote = _estimate(client, file.id)
        assert _limit_error(quote)["code"] == "token_limit_exceeded"
        failed = wait_for(
            client, client.batches.create(input_file_id=file.id, endpoint=CHAT, completion_window="24h").id
        )
        assert failed.status == "failed"
        assert failed.errors is not None and failed.errors.model_dump() == quote["errors"]
    finally:
        engines.release()
        cancel_in_cleanup(client, held.id)


def test_a_replica_without_engines_answers_503(start_app):
    api_only = start_app({"BATCHD_API_KEYS": API_KEYS_ENV, "BATCHD_API_ONLY": "true"})
    client = api_only.client("key-a", max_retries=0)
    file = upload(client, [chat_line("x")])
    with pytest.raises(openai.InternalServerError) as info:
        _estimate(client, file.id)
    assert info.value.status_code == 503 and "--api-only" in info.value.body["message"]


def test_estimate_is_no_batch_id(fake_server):
    for method in ("GET", "DELETE", "OPTIONS"):
        response = fake_server.http.request(method, "/v1/batches/estimate", headers={"Authorization": "Bearer key-a"})
        assert response.status_code == 405 and response.headers["allow"] == "POST"


def test_a_projects_concurrent_estimates_past_its_cap_are_429s_while_others_are_served(start_app):
    """20 estimates of one project at once, each held in its token count: the project's 2 run,
    the other 18 are 429 with Retry-After at once, and meanwhile another project's estimate and
    the first project's upload are answered."""
    engines = FakeEngines()
    server = start_app(
        {"BATCHD_API_KEYS": API_KEYS_ENV, "BATCHD_ESTIMATE_MAX_CONCURRENT_PER_PROJECT": "2"}, engines=engines
    )
    client_a, client_b = server.client("key-a", max_retries=0), server.client("key-b", max_retries=0)
    slow = upload(client_a, [chat_line(f"slow-{i}", "fake:slow-count") for i in range(3)])
    quick = upload(client_b, [chat_line("quick")])
    cap = server.runtime.caps.estimate
    engines.hold_counting()
    try:
        with ThreadPoolExecutor(20) as pool:
            calls = [pool.submit(_estimate_or_error, client_a, slow.id) for _ in range(20)]
            wait_until(lambda: sum(call.done() for call in calls) == 18, what="18 of the 20 estimates to answer")
            refused = [call.result() for call in calls if call.done()]
            assert all(isinstance(error, openai.RateLimitError) for error in refused)
            assert cap.in_flight("proj-a") == 2
            for error in refused:
                assert error.response.headers["Retry-After"] == "5"
                assert "BATCHD_ESTIMATE_MAX_CONCURRENT_PER_PROJECT" in error.body["message"]
            # The project's two wait on their count; another project's estimate and an upload do not.
            assert _estimate(client_b, quick.id)["lines"] == 1
            assert upload(client_a, [chat_line("meanwhile")]).status == "processed"
            assert cap.in_flight("proj-a") == 2 and sum(call.done() for call in calls) == 18
            engines.release_counting()
            served = [call.result(timeout=30) for call in calls]
        assert sorted(quote["lines"] for quote in served if isinstance(quote, dict)) == [3, 3]
    finally:
        engines.release_counting()
    assert cap.in_flight() == 0


def _estimate_or_error(client: openai.OpenAI, file_id: str) -> dict | openai.RateLimitError:
    try:
        return _estimate(client, file_id)
    except openai.RateLimitError as refused:
        return refused
