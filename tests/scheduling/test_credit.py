"""A project's small-batch credit refills to its bucket over a minute."""

from __future__ import annotations

from app.scheduling.credit import CREDIT_LINES, refilled


def test_credit_refills_at_its_bucket_a_minute_and_no_further():
    assert refilled(0.0, 0.0, 30.0) == CREDIT_LINES / 2
    assert refilled(0.0, 0.0, 600.0) == CREDIT_LINES
    assert refilled(40.0, 10.0, 10.0) == 40.0
    assert refilled(40.0, 10.0, 5.0) == 40.0  # a clock read before `since` adds nothing
