"""Audio downloads are bounded (app/engine/audio.py, app/core/outbound.py `download`): one
deadline for the whole download (a server dripping its bytes is cut there), the size limit on
a body sent without a length, a compressed body refused rather than inflated, and one project's
lines hold at most their share of the process's audio slots. Servers on 127.0.0.1 only (allowed
through BATCHD_OUTBOUND_ALLOW); no engine."""

from __future__ import annotations

import asyncio
import time
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager

import pytest
from aiohttp import web

from app.core.outbound import ALLOW_SETTING
from app.engine import audio
from app.engine.audio import LINE_PROJECT, AudioFetchError, audio_slot, fetch_audio
from app.engine.results import LineResult
from app.pipeline.executor import LineExecutor
from app.pipeline.fair_gate import Ticket
from app.pipeline.lines import InputLine
from tests.support.hostile_receivers import gzip_bomb

DEADLINE_S = 1.5


@pytest.fixture(autouse=True)
def settings(monkeypatch):
    monkeypatch.setenv(ALLOW_SETTING, "127.0.0.1")
    monkeypatch.setenv(audio.TIMEOUT_SETTING, str(DEADLINE_S))
    monkeypatch.setenv(audio.MAX_BYTES_SETTING, str(100_000))


async def drip(request: web.Request) -> web.StreamResponse:
    """A 10,000-byte file, one byte every 0.1 s: each read is quick, the whole takes 17 minutes."""
    response = web.StreamResponse(headers={"content-length": "10000", "content-type": "audio/wav"})
    await response.prepare(request)
    for _ in range(10_000):
        await response.write(b"x")
        await asyncio.sleep(0.1)
    return response


async def endless(request: web.Request) -> web.StreamResponse:
    """Bytes without a length and without an end."""
    response = web.StreamResponse(headers={"content-type": "audio/wav"})
    await response.prepare(request)
    while True:
        await response.write(b"x" * 65536)


async def bomb(request: web.Request) -> web.Response:
    return web.Response(body=gzip_bomb(), headers={"content-type": "audio/wav", "content-encoding": "gzip"})


@asynccontextmanager
async def serving() -> AsyncIterator[str]:
    app = web.Application()
    app.router.add_get("/drip.wav", drip)
    app.router.add_get("/endless.wav", endless)
    app.router.add_get("/bomb.wav", bomb)
    runner = web.AppRunner(app, shutdown_timeout=0.1)
    await runner.setup()
    site = web.TCPSite(runner, "127.0.0.1", 0)
    await site.start()
    try:
        yield f"http://127.0.0.1:{runner.addresses[0][1]}"
    finally:
        await runner.cleanup()


def _fetch_error(path: str) -> tuple[str, float]:
    async def scenario() -> tuple[str, float]:
        async with serving() as base:
            started = time.monotonic()
            with pytest.raises(AudioFetchError) as caught:
                await fetch_audio(base + path)
            return str(caught.value), time.monotonic() - started

    return asyncio.run(scenario())


def test_a_dripping_server_is_cut_at_the_downloads_deadline():
    message, took = _fetch_error("/drip.wav")
    assert "timed out" in message and DEADLINE_S - 0.2 <= took < DEADLINE_S + 1.5, (message, took)


def test_a_body_without_a_length_is_stopped_at_the_size_limit():
    message, took = _fetch_error("/endless.wav")
    assert "too large" in message and took < DEADLINE_S


def test_a_compressed_body_is_refused_not_inflated():
    gzip_bomb()
    message, _ = _fetch_error("/bomb.wav")
    assert "compressed body (gzip)" in message


def test_one_project_holds_at_most_its_share_of_the_audio_slots(monkeypatch):
    monkeypatch.setenv(audio.IN_FLIGHT_SETTING, "4")  # a project's share: half, 2

    async def scenario() -> None:
        release = asyncio.Event()
        holding: dict[str, int] = {"greedy": 0, "other": 0, "": 0}

        async def line(project: str) -> None:
            LINE_PROJECT.set(project)
            async with audio_slot():
                holding[project] += 1
                await release.wait()

        greedy = [asyncio.create_task(line("greedy")) for _ in range(6)]
        await asyncio.sleep(0.05)
        assert holding["greedy"] == 2  # the other four wait for the project's share
        others = [asyncio.create_task(line("other")) for _ in range(2)]
        await asyncio.sleep(0.05)
        assert holding["other"] == 2  # at once: the greedy project left them their slots
        release.set()
        await asyncio.gather(*greedy, *others)
        assert holding == {"greedy": 6, "other": 2, "": 0}
        assert audio._loop_slots().projects == {}  # no project's share is kept once idle

    asyncio.run(scenario())


def test_the_line_pipeline_names_the_lines_project():
    seen: list[str] = []

    class Runner:
        async def execute(self, endpoint, body, request_id, priority=0, urgency=None) -> LineResult:
            seen.append(LINE_PROJECT.get())
            return LineResult(200, {})

        async def abort(self, request_id) -> bool:
            return False

    async def lines() -> AsyncIterator[InputLine]:
        for n in range(3):
            yield InputLine(n, f"c-{n}", "/v1/audio/transcriptions", {"model": "m"})

    async def scenario() -> None:
        async def outcome(_) -> None:
            return None

        executor = LineExecutor(Runner(), window=2, ticket=Ticket("proj-audio", "batch_1", 0.0))
        assert await executor.run(lines(), outcome, asyncio.Event())

    asyncio.run(scenario())
    assert seen == ["proj-audio"] * 3
