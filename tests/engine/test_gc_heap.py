"""The collector's settings while upstream lines run: raised and frozen at start, put back at shutdown."""

from __future__ import annotations

import gc

from app.engine import gc_heap


def test_settle_then_restore():
    before = gc.get_threshold()
    gc_heap.settle()
    try:
        assert gc.get_threshold()[0] >= gc_heap.YOUNG_THRESHOLD
        assert gc.get_threshold()[1:] == before[1:]
        assert gc.get_freeze_count() > 0
        gc_heap.settle()  # a second registry's start: the threshold to go back to is still the first
    finally:
        gc_heap.restore()
    assert gc.get_threshold() == before
    assert gc.get_freeze_count() == 0
    gc_heap.restore()  # a second shutdown changes nothing
    assert gc.get_threshold() == before
