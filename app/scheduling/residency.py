"""Which models have a resident engine when a process may hold only so many at once
(``--max-resident-engines``): pure rules over what each model has waiting and running.

A model whose lines wait and that has no engine gets one, in this order of need: lines of an
at-risk batch first, then the earliest deadline, then the most lines. To make room, the least
needed resident engine is unloaded, and only one that is idle or can be drained:

- an engine with no lines in flight or waiting goes at once (an ``always`` engine last);
- a busy engine stays at least ``min_residency`` seconds (a load is costly: it runs lines
  before it can be swapped out again);
- after that, an engine whose work is all due later than the waiting model's gives way: a
  deadline preempts, and the later work cannot preempt it back;
- otherwise (no deadline to go by) models take turns: an engine stays ``min_residency``
  seconds, longer in proportion to its share of the queued lines, so two busy models do not
  swap back and forth at every line;
- a busy engine never gives way to lines of a single-request lane alone (flex requests,
  background responses): they wait for it to be idle, so a stranger's one-line requests to
  another model cannot force a swap after every turn;
- nor to a model loaded on demand less than ``min_load_interval`` seconds ago: swaps per model
  are bounded, whatever the deadlines of the lines that ask for them.

The engine code (:mod:`app.engine.local.residency`) drains the chosen engine (its new lines
wait, those in flight finish), unloads it and loads the needed one; lines are never dropped.
"""

from __future__ import annotations

import functools
import math
from collections.abc import Sequence
from dataclasses import dataclass, field

# A busy engine's turn is min_residency times its share of the queued lines, at most this many.
MAX_TURN_FACTOR = 10.0


@functools.total_ordering
@dataclass(frozen=True)
class Urgency:
    """How soon a line is due: lines granted ahead of fair share first (an at-risk batch's, a
    small batch's on credit: the gate's ``Grant.ahead``), then by deadline (epoch seconds).
    Smaller is more urgent. ``single`` marks a single-request lane's line (a flex request, a
    background response), which never preempts a busy engine; ``start_by`` (epoch seconds) is
    when it must have started (a flex request's wait), else it fails: not part of the ranking."""

    ahead: bool = False
    deadline: float = float("inf")
    single: bool = False
    start_by: float = field(default=math.inf, compare=False)

    def _rank(self) -> tuple[bool, float, bool]:
        return (not self.ahead, self.deadline, self.single)

    def __lt__(self, other: object) -> bool:
        if not isinstance(other, Urgency):
            return NotImplemented
        return self._rank() < other._rank()


# A line with no deadline to go by (the engines' default: `Engines.execute`'s urgency argument,
# which the line pipeline passes with each line and the residency manager ranks models by).
NO_DEADLINE = Urgency()


@dataclass(frozen=True)
class ModelDemand:
    """One model as the residency manager sees it now."""

    model: str
    resident: bool  # loaded or loading
    since: float = 0.0  # when it became resident
    in_flight: int = 0  # lines running on its engine
    waiting: int = 0  # lines waiting for its engine (not resident, or draining)
    # Of its most urgent line of a batch, running or waiting; of a single-request lane's line
    # (``single``) only when no batch line is there.
    urgency: Urgency = NO_DEADLINE
    always: bool = True  # load: always (else on-demand)
    last_load: float | None = None  # when it was last loaded on demand (None: never)

    @property
    def lines(self) -> int:
        return self.in_flight + self.waiting

    @property
    def idle(self) -> bool:
        return self.lines == 0


@dataclass(frozen=True)
class Swap:
    """Load ``load``; first unload ``unload`` (None while the budget has room)."""

    load: str
    unload: str | None = None


def needed(demands: Sequence[ModelDemand]) -> list[ModelDemand]:
    """The models waiting for an engine they do not have, most needed first."""
    wanting = [d for d in demands if not d.resident and d.waiting]
    return sorted(wanting, key=lambda d: (d.urgency, -d.waiting, d.model))


def plan_swap(
    demands: Sequence[ModelDemand],
    budget: int | None,
    now: float,
    min_residency: float,
    min_load_interval: float = 0.0,
) -> Swap | None:
    """The next load (and the unload that makes room for it), or None: nothing waits, or no
    resident engine may give way yet. ``budget`` None means no limit."""
    resident = [d for d in demands if d.resident]
    wanting = needed(demands)
    if not wanting:
        return None
    # Only the most needed: a less needed model taking the place it waits for would go ahead of it.
    candidate = wanting[0]
    if budget is None or len(resident) < budget:
        return Swap(candidate.model)
    victim = _least_needed(resident, candidate, now, min_residency, min_load_interval)
    return None if victim is None else Swap(candidate.model, victim.model)


def _least_needed(
    resident: Sequence[ModelDemand], candidate: ModelDemand, now: float, min_residency: float, min_load_interval: float
) -> ModelDemand | None:
    idle = [d for d in resident if d.idle]
    if idle:
        # An on-demand engine before an always one; of those, the one loaded longest ago.
        return min(idle, key=lambda d: (d.always, d.since, d.model))
    if candidate.urgency.single:
        return None  # one-line requests wait for the busy engine: they never drain a batch's
    if candidate.last_load is not None and now - candidate.last_load < min_load_interval:
        return None  # loaded too recently to take a busy engine's place again
    # Busy ones: the least urgent work first.
    for victim in sorted(resident, key=lambda d: (d.urgency, d.lines), reverse=True):
        if now - victim.since < min_residency:
            continue
        if candidate.urgency < victim.urgency:
            return victim  # ahead against work that is not, or due earlier within the same class
        if now - victim.since >= turn_seconds(victim, candidate, min_residency):
            return victim
    return None


def turn_seconds(resident: ModelDemand, candidate: ModelDemand, min_residency: float) -> float:
    """How long a busy engine keeps its place against ``candidate`` when no deadline decides:
    ``min_residency``, longer in proportion to its queued lines against the candidate's."""
    share = resident.lines / max(1, candidate.lines)
    return min_residency * min(MAX_TURN_FACTOR, max(1.0, share))


__all__ = ["NO_DEADLINE", "ModelDemand", "Swap", "Urgency", "needed", "plan_swap", "turn_seconds"]
