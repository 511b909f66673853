"""Poison lines: which lines were in flight when a model's engine died, so that one line that
kills its engine each time it runs cannot keep the model down for everyone.

A line in flight at one death is a *suspect*: it runs again, but one suspect at a time (the
supervisor's probation, :mod:`app.engine.supervision`), so that a second death while it runs
points at it and not at the lines that happened to run beside it. A line in flight at two deaths
is *quarantined*: it fails with ``engine_crashed`` and is never run again. A suspect that runs
through is cleared.

A line is known by :data:`LINE_KEY`, set by the line pipeline around each engine call to its
``(batch_id, line_no)``: the key outlives one call, so a line the worker runs again (its shard
stopped and claimed again, its engine unloaded and loaded on demand) keeps its record. A call
with no key is known by itself only. The records are this process's: another replica that
takes the shard over starts with none.
"""

from __future__ import annotations

import itertools
from collections import OrderedDict
from collections.abc import Hashable
from contextvars import ContextVar

from app.core import metrics

# The line being run, set by the line pipeline (app.pipeline.executor) around each engine call.
LINE_KEY: ContextVar[Hashable | None] = ContextVar("batchd_line_key", default=None)
# Deaths at which a line is quarantined.
QUARANTINE_AT = 2
# Records kept per model at most (the oldest go first): a suspect whose batch was cancelled, or
# whose shard another replica took, never comes back to be cleared.
MAX_RECORDS = 10_000

# Each engine a supervisor serves with gets a life number: a death is the end of one life.
_lives = itertools.count(1)


def new_life() -> int:
    return next(_lives)


class Suspects:
    """One model's lines that were in flight at its engine's deaths (outlives its engines)."""

    def __init__(self, model: str, max_records: int = MAX_RECORDS) -> None:
        self.model = model
        self._max = max_records
        self._deaths: OrderedDict[Hashable, set[int]] = OrderedDict()  # key -> lives it was in flight at the end of
        self.waiting = 0  # suspects neither cleared nor quarantined: they run again one at a time

    def deaths(self, key: Hashable) -> int:
        return len(self._deaths.get(key, ()))

    def suspected(self, key: Hashable) -> bool:
        return self.deaths(key) > 0

    def quarantined(self, key: Hashable) -> bool:
        return self.deaths(key) >= QUARANTINE_AT

    def record(self, key: Hashable, life: int) -> int:
        """``key`` was in flight when the engine of ``life`` died; how many deaths it has seen
        (the same death counted once, however many of its calls met it)."""
        lives = self._deaths.pop(key, set())
        self._forget(lives)
        lives.add(life)
        self._deaths[key] = lives
        self.waiting += len(lives) < QUARANTINE_AT
        if len(lives) == QUARANTINE_AT:
            metrics.record_line_quarantined(self.model)
        while len(self._deaths) > self._max:
            self._forget(self._deaths.popitem(last=False)[1])
        metrics.set_suspect_lines(self.model, self.waiting)
        return len(lives)

    def clear(self, key: Hashable) -> None:
        """``key`` ran through: not a suspect any more."""
        lives = self._deaths.pop(key, None)
        if lives is not None:
            self._forget(lives)
            metrics.set_suspect_lines(self.model, self.waiting)

    def _forget(self, lives: set[int]) -> None:
        self.waiting -= 0 < len(lives) < QUARANTINE_AT
