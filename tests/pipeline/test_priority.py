"""The deadline -> engine priority rule."""

from __future__ import annotations

from app.pipeline.priority import EPOCH, MAX_PRIORITY, deadline_priority


def test_earlier_deadlines_get_smaller_priorities_behind_online_traffic():
    created = 1_790_000_000
    hour, day = deadline_priority(created + 3600), deadline_priority(created + 86_400)
    later_hour = deadline_priority(created + 7200 + 3600)
    assert 0 < hour < later_hour < day
    assert day - hour == 86_400 - 3600  # one per second of deadline: any two batches compare


def test_always_a_positive_32_bit_integer():
    assert deadline_priority(0) == deadline_priority(EPOCH) == 1
    assert deadline_priority(EPOCH + 2**40) == MAX_PRIORITY == 2**31 - 1
    assert isinstance(deadline_priority(1_790_000_000.7), int)
