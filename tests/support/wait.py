"""A bounded wait on a condition, for tests that must not synchronise with fixed sleeps."""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import TypeVar

T = TypeVar("T")


def eventually(probe: Callable[[], T], timeout: float = 30, interval: float = 0.1, what: str = "") -> T:
    """Calls `probe` until it returns something truthy and returns that; fails with the last
    value it returned once `timeout` seconds have passed."""
    deadline = time.monotonic() + timeout
    while True:
        value = probe()
        if value:
            return value
        if time.monotonic() >= deadline:
            raise AssertionError(f"timed out after {timeout} s waiting for {what or probe}; last: {value!r}")
        time.sleep(interval)
