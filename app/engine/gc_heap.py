"""The garbage collector's settings while lines run (on upstream fleets and in-process engines).

A line in flight holds a few hundred small objects (its task, the HTTP request and response,
their futures and header maps), and lines finish and start in bursts, so the young generation
passes the default threshold of 700 every few lines and each collection promotes the lines in
flight; every few dozen of those a full collection rescans the whole heap of imported modules.
In W8-layers that was about half of the executor layer's CPU (560 young and 5 full collections
per 8,000 lines; the bare client's steady request loop needs 30 and none). Freezing the heap
after start keeps the modules out of every collection, and a young threshold of 10,000 lets the
objects of a burst of lines die before they are scanned (1 collection per 8,000 lines). The
in-process registry settles too once its engines are up (as `vllm serve` freezes its heap after
start-up). One process may run both registries (the multiplexer): the settings stay until the
last one restores them."""

from __future__ import annotations

import gc

YOUNG_THRESHOLD = 10_000

_threshold_before: tuple[int, int, int] | None = None
_settled = 0  # registries that settled and have not restored


def _settle() -> None:
    """Freeze what start built and raise the young generation's threshold."""
    global _threshold_before, _settled
    gc.collect()
    gc.freeze()
    _settled += 1
    if _threshold_before is None:
        _threshold_before = gc.get_threshold()
    first, *older = _threshold_before
    gc.set_threshold(max(first, YOUNG_THRESHOLD), *older)


def _restore() -> None:
    """Undo one :func:`_settle`; the last one unfreezes (frozen objects are otherwise never
    collected, not even at exit: those in reference cycles include Triton's nanobind objects,
    which nanobind then reports as ~40 lines of "nanobind: leaked ..." when the process exits)."""
    global _threshold_before, _settled
    if _settled == 0:
        return
    _settled -= 1
    if _settled or _threshold_before is None:
        return
    gc.unfreeze()
    gc.set_threshold(*_threshold_before)
    _threshold_before = None


class HeapSettings:
    """One registry's hold on the settings: `settle()` once started, `restore()` at shutdown
    (either may be called again: only the first after the other counts)."""

    def __init__(self) -> None:
        self._held = False

    def settle(self) -> None:
        if not self._held:
            _settle()
            self._held = True

    def restore(self) -> None:
        if self._held:
            self._held = False
            _restore()
