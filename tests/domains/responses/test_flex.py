"""Flex processing (`service_tier: "flex"` on the synchronous routes) through the official `openai`
client, on the app in process with the fake engine (tests/support/fake_engine.py): each call is a
one-line batch that the call waits for."""

from __future__ import annotations

import asyncio
import json
from concurrent.futures import ThreadPoolExecutor

import openai
import pytest

from harness.poll import wait_until
from tests.conftest import API_KEYS_ENV
from tests.support import db
from tests.support.app_server import ORIGIN, AppServer
from tests.support.batches import CHAT_MODEL, EMBED_MODEL
from tests.support.fake_engine import FakeEngines

HI = [{"role": "user", "content": "hi"}]


def _flex_rows(server) -> list[tuple[str, str]]:
    return db.execute(server, "SELECT id, status FROM batches WHERE api = 'flex' ORDER BY seq")


def test_a_flex_chat_call_returns_a_chat_completion_with_usage(fake_server, fake_client):
    done = fake_client.chat.completions.create(model=CHAT_MODEL, messages=HI, service_tier="flex")
    assert (done.object, done.service_tier, done.choices[0].message.content) == ("chat.completion", "flex", "echo: hi")
    assert done.usage is not None and done.usage.completion_tokens == 2 and done.usage.prompt_tokens > 0
    rows = _flex_rows(fake_server)
    assert rows and not {row[0] for row in rows} & {b.id for b in fake_client.batches.list(limit=100)}


def test_an_answered_flex_request_leaves_no_files_and_a_tombstone(fake_server, fake_client):
    fake_client.chat.completions.create(model=CHAT_MODEL, messages=HI, service_tier="flex")
    ((batch_id, input_file_id, deleted_at),) = db.execute(
        fake_server,
        "SELECT id, input_file_id, deleted_at FROM batches WHERE api = 'flex' ORDER BY seq DESC LIMIT 1",
    )
    assert deleted_at is not None
    assert not [f for f in fake_client.files.list() if f.id == input_file_id or batch_id in f.filename]


def test_flex_completions_embeddings_and_responses(fake_client):
    text = fake_client.completions.create(model=CHAT_MODEL, prompt="yo", extra_body={"service_tier": "flex"})
    assert (text.object, text.choices[0].text) == ("text_completion", "echo: yo")
    vectors = fake_client.embeddings.create(model=EMBED_MODEL, input=["a", "b"], extra_body={"service_tier": "flex"})
    assert len(vectors.data) == 2 and vectors.usage.prompt_tokens > 0
    response = fake_client.responses.create(model=CHAT_MODEL, input="hello", service_tier="flex")
    assert (response.output_text, response.service_tier) == ("echo: hello", "flex")
    assert response.usage is not None and response.usage.output_tokens == 2


def test_stream_true_parses_with_the_openai_client(fake_client):
    chunks = list(fake_client.chat.completions.create(model=CHAT_MODEL, messages=HI, service_tier="flex", stream=True))
    assert "".join(c.choices[0].delta.content or "" for c in chunks if c.choices) == "echo: hi"
    assert chunks[-1].choices[0].finish_reason == "length"
    events = list(fake_client.responses.create(model=CHAT_MODEL, input="there", service_tier="flex", stream=True))
    assert [e.type for e in events] == ["response.created", "response.output_text.delta", "response.completed"]
    assert events[1].delta == "echo: there" and events[-1].response.output_text == "echo: there"


@pytest.mark.parametrize("path", ["/chat/completions", "/completions", "/embeddings", "/responses"])
def test_without_the_flex_tier_is_a_400_that_says_where_online_traffic_goes(fake_server, path):
    body = {"model": CHAT_MODEL, "messages": HI, "prompt": "x", "input": "x"}
    answer = fake_server.http.post(f"/v1{path}", json=body, headers=fake_server.as_key("key-a"))
    assert answer.status_code == 400, answer.text
    error = answer.json()["error"]
    assert error["type"] == "invalid_request_error" and "vllm serve" in error["message"]
    assert "flex" in error["message"]


def test_a_flex_call_that_cannot_start_in_time_is_a_429_and_never_runs(backend, tmp_path_factory, database_factory):
    data_dir, url = tmp_path_factory.mktemp("flex-busy"), database_factory()
    env = {"BATCHD_API_KEYS": API_KEYS_ENV, "BATCHD_FLEX_WAIT_SECONDS": "0.5"}
    with AppServer(data_dir, url, env={**env, "BATCHD_API_ONLY": "true"}) as api:  # no worker: nothing starts
        client = api.client("key-a", max_retries=0)
        with pytest.raises(openai.RateLimitError) as caught:
            client.chat.completions.create(model=CHAT_MODEL, messages=HI, service_tier="flex")
        assert caught.value.response.headers["Retry-After"] == "1"
        assert caught.value.response.json()["error"]["code"] == "resource_unavailable"
        ((batch_id, status),) = _flex_rows(api)
        assert status == "cancelling"
        engines = FakeEngines()
        with AppServer(data_dir, url, env=env, engines=engines) as worker:
            wait_until(lambda: _flex_rows(worker) == [(batch_id, "cancelled")], what="the flex line to end cancelled")
        assert engines.executed == 0


def test_a_client_that_disconnects_cancels_its_line(start_app):
    server = start_app({"BATCHD_API_KEYS": API_KEYS_ENV}, engines=FakeEngines())
    body = json.dumps(
        {"model": CHAT_MODEL, "messages": [{"role": "user", "content": "fake:stall"}], "service_tier": "flex"}
    )

    async def call_then_leave() -> list[dict]:
        loop = asyncio.get_running_loop()
        leave_at, sent = loop.time() + 1.5, []

        async def receive() -> dict:
            if not sent:
                sent.append(True)
                return {"type": "http.request", "body": body.encode(), "more_body": False}
            while loop.time() < leave_at:
                await asyncio.sleep(0.05)
            return {"type": "http.disconnect"}

        messages: list[dict] = []

        async def send(message: dict) -> None:
            messages.append(message)

        host = ORIGIN.split("://", 1)[1].encode()
        headers = [
            (b"host", host),
            (b"authorization", b"Bearer key-a"),
            (b"content-type", b"application/json"),
            (b"content-length", str(len(body)).encode()),
        ]
        scope = {
            "type": "http",
            "asgi": {"version": "3.0"},
            "http_version": "1.1",
            "method": "POST",
            "scheme": "http",
            "path": "/v1/chat/completions",
            "raw_path": b"/v1/chat/completions",
            "query_string": b"",
            "root_path": "",
            "headers": headers,
            "client": ("127.0.0.1", 50000),
            "server": ("127.0.0.1", 80),
            "state": {},
        }
        await server.app(scope, receive, send)
        return messages

    messages = server.call(call_then_leave)
    assert messages[0]["status"] == 499
    ((batch_id, _),) = _flex_rows(server)
    wait_until(lambda: _flex_rows(server) == [(batch_id, "cancelled")], what="the flex line to end cancelled")
    wait_until(lambda: server.engines.in_flight == 0, what="the line to stop")


def test_the_engines_refusal_and_an_unknown_model_come_back_as_errors(fake_client):
    with pytest.raises(openai.BadRequestError) as caught:
        fake_client.chat.completions.create(
            model=CHAT_MODEL, messages=[{"role": "user", "content": "fake:400"}], service_tier="flex"
        )
    assert caught.value.response.json()["error"]["message"] == "The fake engine refused this line."
    with pytest.raises(openai.NotFoundError) as missing:
        fake_client.chat.completions.create(model="no-such-model", messages=HI, service_tier="flex")
    error = missing.value.response.json()["error"]
    assert error["code"] == "model_not_found" and "no-such-model" in error["message"]


def test_flex_waiters_past_the_projects_or_the_servers_cap_are_429s(backend, tmp_path_factory, database_factory):
    """No worker, so flex calls wait (2 s, then their own 429): one project has at most one
    waiting, the server two; one more is a 429 with Retry-After at once."""
    env = {
        "BATCHD_API_KEYS": API_KEYS_ENV,
        "BATCHD_API_ONLY": "true",
        "BATCHD_FLEX_WAIT_SECONDS": "2",
        "BATCHD_FLEX_MAX_WAITING_PER_PROJECT": "1",
        "BATCHD_FLEX_MAX_WAITING": "2",
    }
    with AppServer(tmp_path_factory.mktemp("flex-cap"), database_factory(), env=env) as api:
        cap = api.runtime.caps.flex_wait

        def call(key: str) -> openai.RateLimitError:
            with pytest.raises(openai.RateLimitError) as caught:
                api.client(key, max_retries=0).chat.completions.create(
                    model=CHAT_MODEL, messages=HI, service_tier="flex"
                )
            return caught.value

        with ThreadPoolExecutor(2) as pool:
            waiting = [pool.submit(call, "key-a")]
            wait_until(lambda: cap.in_flight() == 1, what="proj-a's flex call to wait")
            second = call("key-a")  # the project's cap
            waiting.append(pool.submit(call, "key-b"))
            wait_until(lambda: cap.in_flight() == 2, what="proj-b's flex call to wait")
            third = call("key-list")  # the server's cap
            assert second.response.headers["Retry-After"] and third.response.headers["Retry-After"]
            assert (second.code, third.code) == ("rate_limit_exceeded", "rate_limit_exceeded")
            assert "BATCHD_FLEX_MAX_WAITING_PER_PROJECT" in second.message
            assert "BATCHD_FLEX_MAX_WAITING)" in third.message
            # The waiters end as flex calls that cannot start do; only theirs were queued.
            assert [f.result(timeout=30).code for f in waiting] == ["resource_unavailable"] * 2
        assert len(_flex_rows(api)) == 2 and cap.in_flight() == 0
