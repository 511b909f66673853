"""Validation's custom_id set: every repeat is found, no distinct id is taken for a repeat, and
it stays small (flat arrays, not a million strings)."""

from __future__ import annotations

import random
import tracemalloc

from app.pipeline.id_set import _STRAGGLERS, CustomIdSet


def test_repeats_are_found_and_distinct_ids_are_not():
    ids = CustomIdSet(capacity=4)  # grows many times on the way
    assert all(ids.add(f"request-{i}") for i in range(200_000))
    assert len(ids) == 200_000
    assert not any(ids.add(f"request-{i}") for i in range(0, 200_000, 997))
    assert ids.add("") and not ids.add("")
    assert ids.add("ünïcode ✓") and not ids.add("ünïcode ✓")
    assert len(ids) == 200_002


def test_ids_take_about_24_bytes_each():
    n = 250_000
    tracemalloc.start()
    try:
        ids = CustomIdSet()
        for i in range(n):
            ids.add(f"c-{i}")
        held, _ = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    # 2^19 slots of 12 bytes (the table doubles past half full); a set of the strings takes
    # about 100 bytes an id (W9: ~100 MB for a million).
    assert held < 30 * n, held


def test_chunks_of_ids_agree_with_a_set_whatever_their_size():
    """add_all (array rounds for most ids, one by one for the last few of a batch: _STRAGGLERS)
    and add, mixed, answer as a Python set of the strings does."""
    rng = random.Random(7)
    ids, seen = CustomIdSet(capacity=4), set()
    for _ in range(600):
        size = rng.choice((1, 5, _STRAGGLERS, _STRAGGLERS + 1, 200, 1500))
        chunk = [f"r{rng.randrange(60_000)}" for _ in range(size)]
        fresh = len(set(chunk)) == len(chunk) and not seen & set(chunk)
        assert ids.add_all(chunk) == fresh
        if fresh:
            seen.update(chunk)
        one = f"r{rng.randrange(60_000)}"
        assert ids.add(one) == (one not in seen)
        seen.add(one)
    assert len(ids) == len(seen)
    assert not any(ids.add(i) for i in list(seen)[::50])
