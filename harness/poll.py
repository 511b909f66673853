"""The one way to wait: poll a condition until it holds, with a bounded timeout; and its use for
a batch reaching a status."""

from __future__ import annotations

import asyncio
import time
from collections.abc import Callable, Collection
from typing import Any, TypeVar

import openai

from app.core.statuses import TERMINAL_BATCH_STATUSES

TERMINAL = frozenset(TERMINAL_BATCH_STATUSES)

T = TypeVar("T")


def _timed_out(timeout: float, what: str, last: object) -> TimeoutError:
    return TimeoutError(f"timed out after {timeout:.0f} s waiting for {what}; last: {last!r}")


def wait_until(
    check: Callable[[], T], timeout: float = 30, what: str | Callable[[], str] = "the condition", interval: float = 0.1
) -> T:
    """Call `check` until it returns something truthy and return that; TimeoutError naming
    `what` (or what `what()` says at that moment) and the last value once `timeout` seconds have passed."""
    deadline = time.monotonic() + timeout
    while True:
        value = check()
        if value:
            return value
        if time.monotonic() > deadline:
            raise _timed_out(timeout, what() if callable(what) else what, value)
        time.sleep(interval)


async def wait_until_async(
    check: Callable[[], T], timeout: float = 30, what: str = "the condition", interval: float = 0.02
) -> T:
    """`wait_until` inside an event loop: the loop keeps running between checks."""
    deadline = time.monotonic() + timeout
    while True:
        value = check()
        if value:
            return value
        if time.monotonic() > deadline:
            raise _timed_out(timeout, what, value)
        await asyncio.sleep(interval)


def wait_for_batch(
    client: openai.OpenAI,
    batch_id: str,
    statuses: Collection[str] = TERMINAL,
    timeout: float = 300,
    until: Callable[[Any], bool] | None = None,
    interval: float | Callable[[float, Any], float] = 0.2,
):
    """Poll the batch until its status is one of `statuses` (or `until(batch)` is true) and
    return it. `interval` is seconds between polls, or a function of the seconds elapsed and
    the batch last seen."""
    started = time.monotonic()
    while True:
        batch = client.batches.retrieve(batch_id)
        if batch.status in statuses or (until is not None and until(batch)):
            return batch
        elapsed = time.monotonic() - started
        if elapsed > timeout:
            raise TimeoutError(f"batch {batch_id} still {batch.status} after {timeout:.0f} s: {batch.request_counts}")
        time.sleep(interval(elapsed, batch) if callable(interval) else interval)
