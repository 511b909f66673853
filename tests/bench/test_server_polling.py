"""The server system's polls: seldom while its counts say much is left, every 50 ms near the end."""

from __future__ import annotations

from types import SimpleNamespace

from bench.systems.server import _poll_interval


def _batch(total: int, completed: int, failed: int = 0) -> SimpleNamespace:
    return SimpleNamespace(request_counts=SimpleNamespace(total=total, completed=completed, failed=failed))


def test_polls_by_the_time_left():
    assert _poll_interval(1.0, _batch(0, 0)) == 0.05  # validating: 0.5 % of the time elapsed
    assert _poll_interval(400.0, _batch(4000, 0)) == 1.0
    assert _poll_interval(2.0, _batch(4000, 400)) == 1.0  # 18 s left: the 1 s cap
    assert _poll_interval(19.0, _batch(4000, 3600, 200)) == 0.25  # 1 s left: a quarter of it
    assert _poll_interval(20.0, _batch(4000, 3990, 10)) == 0.05  # every line ran: finalizing
