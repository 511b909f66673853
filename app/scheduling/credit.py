"""Small-batch credit: how a small batch finishes in seconds at any number of teams without
letting anyone take the engine with small batches.

At a fair twentieth of a fleet a 100-line batch takes many seconds. So a small batch's lines
(fair_share.SMALL_BATCH_LINES) go ahead of fair share, paid from its project's credit: a bucket
of CREDIT_LINES lines per project that refills at CREDIT_LINES a minute. A team that sends a
small batch now and then has it done at once; one that cuts big work into small batches gets
at most a hundred lines a minute ahead (about 2 lines/s), the rest at its fair share."""

from __future__ import annotations

CREDIT_LINES = 100.0
REFILL_PER_SECOND = CREDIT_LINES / 60


def refilled(credit: float, since: float, now: float) -> float:
    """A bucket's credit at `now`, holding `credit` at `since`."""
    return min(CREDIT_LINES, credit + max(0.0, now - since) * REFILL_PER_SECOND)


__all__ = ["CREDIT_LINES", "REFILL_PER_SECOND", "refilled"]
