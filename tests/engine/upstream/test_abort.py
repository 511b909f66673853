"""Abort of an upstream line: the line's own call raises RequestAborted, a cancel of its caller
stays a cancel, and shutdown stops what is in flight (against a real fake fleet that answers
after a delay)."""

from __future__ import annotations

import asyncio

import pytest

from app.engine.config.upstream import UpstreamSpec
from app.engine.errors import RequestAborted
from app.engine.upstream.registry import UpstreamRegistry
from harness.fake_fleet import FakeFleet
from harness.poll import wait_until_async

ENDPOINT = "/v1/chat/completions"
BODY = {"model": "fake-model", "messages": [{"role": "user", "content": "hi"}]}


@pytest.fixture(scope="module")
def slow_fleet(tmp_path_factory):
    fleet = FakeFleet(tmp_path_factory.mktemp("slow-fleet"), delay_ms=3000).start()
    yield fleet
    fleet.stop()


async def _registry(fleet: FakeFleet) -> UpstreamRegistry:
    registry = UpstreamRegistry()
    await registry.start([UpstreamSpec(name="fake-model", urls=tuple(fleet.urls), model="fake-model")])
    return registry


async def _in_flight(registry: UpstreamRegistry, fleet: FakeFleet, request_id: str) -> asyncio.Task:
    """Start a line and return once the fleet has received its request (it answers 3 s later)."""
    received = fleet.stats().get("requests", 0)
    line = asyncio.create_task(registry.execute(ENDPOINT, BODY, request_id))
    await wait_until_async(lambda: fleet.stats().get("requests", 0) > received, 10, f"{request_id} at the fleet")
    assert request_id in registry._inflight.tasks and not line.done()
    return line


def test_abort_raises_request_aborted_in_that_line_only(slow_fleet):
    async def scenario() -> None:
        registry = await _registry(slow_fleet)
        try:
            aborted, other = (
                await _in_flight(registry, slow_fleet, "req-a"),
                await _in_flight(registry, slow_fleet, "req-b"),
            )
            assert await registry.abort("req-a") is True
            with pytest.raises(RequestAborted):
                await aborted
            assert not other.done()
            assert aborted.cancelling() == 0  # the abort's cancel was undone: not a cancelled task
            result = await other
            assert result.status_code == 200 and result.body["object"] == "chat.completion"
            assert await registry.abort("req-a") is False  # no longer in flight
            assert registry._inflight.tasks == {}
        finally:
            await registry.shutdown()

    asyncio.run(scenario())


def test_cancelling_the_caller_stays_a_cancel_even_when_aborted_too(slow_fleet):
    async def scenario() -> None:
        registry = await _registry(slow_fleet)
        try:
            line = await _in_flight(registry, slow_fleet, "req-c")
            line.cancel()
            with pytest.raises(asyncio.CancelledError):
                await line
            both = await _in_flight(registry, slow_fleet, "req-d")
            both.cancel()
            await registry.abort("req-d")
            with pytest.raises(asyncio.CancelledError):
                await both
            assert registry._inflight.tasks == {}
        finally:
            await registry.shutdown()

    asyncio.run(scenario())


def test_shutdown_aborts_lines_in_flight(slow_fleet):
    async def scenario() -> None:
        registry = await _registry(slow_fleet)
        line = await _in_flight(registry, slow_fleet, "req-e")
        await asyncio.wait_for(registry.shutdown(), 2)  # well before the fleet's 3 s answer
        with pytest.raises(RequestAborted):
            await line

    asyncio.run(scenario())
