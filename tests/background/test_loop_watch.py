"""The loop watch logs a stalled event loop once, with the code that held it."""

from __future__ import annotations

import asyncio
import logging
import time

from app.background.loop_watch import LoopWatch


def _hold_the_loop(seconds: float) -> None:
    time.sleep(seconds)  # a blocking call inside a coroutine: the stall under test


async def _stall_once() -> LoopWatch:
    async with LoopWatch(stall_seconds=0.5) as watch:
        await asyncio.sleep(0.6)  # the loop runs: nothing to report
        assert watch.stalls == 0
        _hold_the_loop(1.5)
        await asyncio.sleep(0.6)
    return watch


async def _busy_loop() -> LoopWatch:
    async with LoopWatch(stall_seconds=0.5) as watch:
        deadline = time.monotonic() + 1.5
        while time.monotonic() < deadline:
            time.sleep(0.05)  # short holds, each well under the threshold
            await asyncio.sleep(0)
    return watch


def test_a_stall_is_logged_once_with_the_code_that_held_the_loop(caplog):
    caplog.set_level(logging.WARNING, logger="batchd.loop")
    watch = asyncio.run(_stall_once())
    assert watch.stalls == 1, caplog.text
    stalled, ran_again = [record.getMessage() for record in caplog.records]
    assert "the event loop has not run for" in stalled and "_hold_the_loop" in stalled
    held = float(ran_again.removeprefix("the event loop ran again after ").removesuffix(" s"))
    assert 1.4 <= held <= 2.5, ran_again


def test_a_busy_but_running_loop_is_no_stall(caplog):
    caplog.set_level(logging.WARNING, logger="batchd.loop")
    watch = asyncio.run(_busy_loop())
    assert watch.stalls == 0 and caplog.records == []
