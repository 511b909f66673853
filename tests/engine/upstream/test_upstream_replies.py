"""What batchd reads of an upstream's replies (app/engine/upstream/replies.py), against a hostile
server on 127.0.0.1 in the test's own loop: a line's answer past the cap is the line's 502, read
no further; a gzip bomb is never inflated (the reply is asked for as is); a 307 to a POST is the
line's answer, the POST is not sent again elsewhere; and a URL listing more LoRA adapters than
the cap gets the first of them (by id) served."""

from __future__ import annotations

import asyncio
import tracemalloc
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager

import pytest
from aiohttp import web

from app.engine.config.upstream import UpstreamSpec
from app.engine.upstream import replies
from app.engine.upstream.registry import UpstreamRegistry
from tests.support.hostile_receivers import gzip_bomb

MODEL = "fake-model"
ENDPOINT = "/v1/chat/completions"
BODY = {"model": MODEL, "messages": [{"role": "user", "content": "hi"}]}
MB = 1_000_000


class Hostile:
    """How the server answers `POST /v1/chat/completions`, and what it saw."""

    def __init__(self, answer: str, adapters: int = 0) -> None:
        self.answer, self.adapters = answer, adapters
        self.hits: list[tuple[str, str]] = []  # (path, accept-encoding)

    async def models(self, request: web.Request) -> web.Response:
        cards = [{"id": MODEL, "object": "model"}]
        cards += [{"id": f"lora-{i:04d}", "object": "model", "parent": MODEL} for i in range(self.adapters)]
        return web.json_response({"object": "list", "data": cards})

    async def chat(self, request: web.Request) -> web.StreamResponse:
        self.hits.append((request.path, request.headers.get("accept-encoding", "")))
        await request.read()
        if self.answer == "huge":  # 200 MB of JSON-ish bytes, streamed without a length
            response = web.StreamResponse(headers={"content-type": "application/json"})
            await response.prepare(request)
            await response.write(b'{"pad": "')
            chunk = b"x" * (1 << 20)
            for _ in range(200):
                await response.write(chunk)
            await response.write_eof()
            return response
        if self.answer == "bomb":
            return web.Response(
                body=gzip_bomb(), headers={"content-type": "application/json", "content-encoding": "gzip"}
            )
        if self.answer == "redirect":
            raise web.HTTPTemporaryRedirect("/v1/elsewhere")
        return web.json_response({"object": "chat.completion", "choices": []})

    async def elsewhere(self, request: web.Request) -> web.Response:
        self.hits.append((request.path, ""))
        return web.json_response({"object": "chat.completion", "choices": []})


@asynccontextmanager
async def serving(hostile: Hostile) -> AsyncIterator[UpstreamRegistry]:
    app = web.Application()
    app.router.add_get("/v1/models", hostile.models)
    app.router.add_post("/v1/chat/completions", hostile.chat)
    app.router.add_post("/v1/elsewhere", hostile.elsewhere)
    runner = web.AppRunner(app)
    await runner.setup()
    site = web.TCPSite(runner, "127.0.0.1", 0)
    await site.start()
    port = runner.addresses[0][1]
    registry = UpstreamRegistry()
    try:
        spec = UpstreamSpec(name=MODEL, urls=(f"http://127.0.0.1:{port}/v1",), model=MODEL, timeout_s=10, deadline_s=10)
        await registry.start([spec])
        yield registry
    finally:
        await registry.shutdown()
        await runner.cleanup()


def test_an_answer_past_the_cap_is_the_lines_502_and_read_no_further(monkeypatch):
    monkeypatch.setattr(replies, "MAX_REPLY_BYTES", 4 * MB)
    monkeypatch.setattr("app.engine.upstream.transport.MAX_REPLY_BYTES", 4 * MB)

    async def scenario() -> None:
        hostile = Hostile("huge")
        async with serving(hostile) as registry:
            tracemalloc.start()
            try:
                result = await registry.execute(ENDPOINT, BODY, "req-huge")
                _, peak = tracemalloc.get_traced_memory()
            finally:
                tracemalloc.stop()
        assert result.status_code == 502 and "too large" in result.body["error"]["message"]
        assert len(hostile.hits) == 1  # not retried: the same line would get the same answer
        assert peak < 30 * MB, f"{peak / MB:.0f} MB"

    asyncio.run(scenario())


def test_a_gzip_bomb_is_never_inflated():
    gzip_bomb()  # built before measuring

    async def scenario() -> None:
        hostile = Hostile("bomb")
        async with serving(hostile) as registry:
            tracemalloc.start()
            try:
                before, _ = tracemalloc.get_traced_memory()
                result = await registry.execute(ENDPOINT, BODY, "req-bomb")
                _, peak = tracemalloc.get_traced_memory()
            finally:
                tracemalloc.stop()
        # Read as it came (about 1 MB, not JSON): the line's error, never 1 GiB in memory.
        assert result.status_code == 200 and "not a JSON object" in result.body["error"]["message"]
        assert peak - before < 50 * MB, f"{(peak - before) / MB:.0f} MB"
        assert hostile.hits == [("/v1/chat/completions", "identity")]

    asyncio.run(scenario())


def test_a_redirect_answering_a_post_is_the_lines_answer():
    async def scenario() -> None:
        hostile = Hostile("redirect")
        async with serving(hostile) as registry:
            result = await registry.execute(ENDPOINT, BODY, "req-redirect")
        assert result.status_code == 307
        assert [path for path, _ in hostile.hits] == ["/v1/chat/completions"]  # nothing sent elsewhere

    asyncio.run(scenario())


@pytest.mark.parametrize("listed", [3, replies.MAX_ADAPTERS + 40])
def test_the_adapters_a_url_lists_are_capped(listed):
    async def scenario() -> None:
        async with serving(Hostile("ok", adapters=listed)) as registry:
            served = [card["id"] for card in registry.model_cards() if card.get("parent") == MODEL]
        expected = min(listed, replies.MAX_ADAPTERS)
        assert served == [f"lora-{i:04d}" for i in range(expected)]

    asyncio.run(scenario())
