"""The collector's settings while lines run: raised and frozen when a registry starts, put back
when the last registry that settled them shuts down."""

from __future__ import annotations

import gc

from app.engine.gc_heap import YOUNG_THRESHOLD, HeapSettings


def test_settled_until_the_last_registry_restores():
    before = gc.get_threshold()
    local, upstream = HeapSettings(), HeapSettings()
    local.settle()
    try:
        assert gc.get_threshold()[0] >= YOUNG_THRESHOLD
        assert gc.get_threshold()[1:] == before[1:]
        assert gc.get_freeze_count() > 0
        upstream.settle()  # the multiplexer's second registry
        upstream.settle()  # a start called again counts once
        local.restore()
        local.restore()  # a second shutdown changes nothing
        assert gc.get_threshold()[0] >= YOUNG_THRESHOLD and gc.get_freeze_count() > 0
    finally:
        upstream.restore()
    assert gc.get_threshold() == before
    assert gc.get_freeze_count() == 0
    upstream.restore()
    assert gc.get_threshold() == before and gc.get_freeze_count() == 0
