"""The garbage collector's settings while lines run on upstream fleets.

A line in flight holds a few hundred small objects (its task, the HTTP request and response,
their futures and header maps), and lines finish and start in bursts, so the young generation
passes the default threshold of 700 every few lines and each collection promotes the lines in
flight; every few dozen of those a full collection rescans the whole heap of imported modules.
In W8-layers that was about half of the executor layer's CPU (560 young and 5 full collections
per 8,000 lines; the bare client's steady request loop needs 30 and none). Freezing the heap
after start keeps the modules out of every collection, and a young threshold of 10,000 lets the
objects of a burst of lines die before they are scanned (1 collection per 8,000 lines)."""

from __future__ import annotations

import gc

YOUNG_THRESHOLD = 10_000

_threshold_before: tuple[int, int, int] | None = None


def settle() -> None:
    """Freeze what start built and raise the young generation's threshold."""
    global _threshold_before
    gc.collect()
    gc.freeze()
    if _threshold_before is None:
        _threshold_before = gc.get_threshold()
    first, *older = _threshold_before
    gc.set_threshold(max(first, YOUNG_THRESHOLD), *older)


def restore() -> None:
    """Undo :func:`settle` (frozen objects are otherwise never collected, not even at exit)."""
    global _threshold_before
    if _threshold_before is None:
        return
    gc.unfreeze()
    gc.set_threshold(*_threshold_before)
    _threshold_before = None
