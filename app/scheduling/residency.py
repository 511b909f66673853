"""Which models have a resident engine when a process may hold only so many at once
(``--max-resident-engines``, or as many as fit ``--engine-memory-budget``): pure rules over what
each model has waiting and running.

A model whose lines wait and that has no engine gets one, in this order of need: lines of an
at-risk batch first (at risk of missing its deadline, by the scheduler's projection:
:mod:`app.scheduling.fair_share`), then the earliest deadline, then the most lines. To make
room, a resident engine is unloaded, and only one that is idle or may be preempted:

- an engine with no lines in flight or waiting (drained) goes once it has stayed so for
  ``drain_grace`` seconds of the candidate's wait (an ``always`` engine last): a gap between
  shards, or a batch created a moment after another model's still validating, is not a drain;
- a loaded engine that still has lines stays while no waiting model's work is at risk: a load
  costs tens of seconds, so work that will meet its deadline anyway waits for the busy engine
  to drain (a 1h batch behind a 24h one on another model is loaded when it becomes at risk,
  not before);
- a waiting model whose work is at risk preempts a busy engine once that has been resident
  ``min_residency`` seconds: at once if the busy engine's own work is not at risk; if it is at
  risk too, only for work due earlier (the later cannot preempt it back) or, due at the same
  time, once the busy engine's turn is over (``min_residency``, longer in proportion to its
  share of the queued lines, so two at-risk models do not swap at every line);
- a busy engine never gives way to lines of a single-request lane alone (flex requests,
  background responses): they wait for it to be idle, so a stranger's one-line requests to
  another model cannot force a swap after every turn;
- nor to a model loaded on demand less than ``min_load_interval`` seconds ago: swaps per model
  are bounded, whatever the deadlines of the lines that ask for them.

With a memory budget a model has room when its engine's memory need fits beside the resident
engines' (and the count limit, if given, still holds): the next engine then loads while the
others finish their lines, none unloaded. Without room, engines give way one swap at a time
until the waiting one fits, and only if those that must go together may all give way.

Each :class:`Swap` says why (:class:`SwapReason`), for the log and the metrics. The engine code
(:mod:`app.engine.local.residency`) drains the chosen engine (its new lines wait, those in
flight finish), unloads it and loads the needed one; lines are never dropped.
"""

from __future__ import annotations

import functools
import math
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from enum import StrEnum

# A busy engine's turn is min_residency times its share of the queued lines, at most this many.
MAX_TURN_FACTOR = 10.0


@functools.total_ordering
@dataclass(frozen=True)
class Urgency:
    """How soon a line is due: lines granted ahead of fair share first (an at-risk batch's, a
    small batch's on credit: the gate's ``Grant.ahead``), then by deadline (epoch seconds).
    Smaller is more urgent. ``single`` marks a single-request lane's line (a flex request, a
    background response), which never preempts a busy engine; ``start_by`` (epoch seconds) is
    when it must have started (a flex request's wait), else it fails: not part of the ranking.

    ``batch_id`` and ``risk`` say whether the line's batch is at risk *now*: ``risk(batch_id)``
    is the scheduler's at-risk lookup, read each time a swap is planned (a line's batch may
    become at risk while it waits); without them a line counts as at risk if it was granted
    ahead. The batch id tells lines of two batches apart but does not rank them."""

    ahead: bool = False
    deadline: float = float("inf")
    single: bool = False
    start_by: float = field(default=math.inf, compare=False)
    batch_id: str | None = None
    risk: Callable[[str], bool] | None = field(default=None, compare=False, repr=False)

    def at_risk(self) -> bool:
        """Whether the line's batch is at risk of missing its deadline now."""
        if self.single:
            return False
        if self.risk is not None and self.batch_id is not None:
            return self.risk(self.batch_id)
        return self.ahead

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
    at_risk: bool = False  # a batch with lines running or waiting here is at risk (now)
    memory: int = 0  # bytes its engine takes when loaded (its need under a memory budget)
    idle_since: float = 0.0  # when it last had a line (or became resident, if none since)
    waiting_since: float | None = None  # when its waiting lines began waiting (None: none wait)

    @property
    def lines(self) -> int:
        return self.in_flight + self.waiting

    @property
    def idle(self) -> bool:
        return self.lines == 0


class SwapReason(StrEnum):
    """Why a swap is made (the log's and ``batchd_engine_swaps_total``'s ``reason``)."""

    ROOM = "room"  # the budget has room: nothing is unloaded
    DRAINED = "drained"  # the engine unloaded has no line running or waiting
    AT_RISK = "at_risk"  # the waiting work is at risk, the busy engine's is not
    DUE_EARLIER = "due_earlier"  # both at risk: the waiting work is due earlier
    TURN = "turn"  # both at risk, due together: the busy engine's turn is over


@dataclass(frozen=True)
class Swap:
    """Load ``load``; first unload ``unload`` (None while the budget has room), for ``reason``
    (not part of equality: a plan is the same swap whatever the words for it)."""

    load: str
    unload: str | None = None
    reason: SwapReason = field(default=SwapReason.ROOM, compare=False)


def needed(demands: Sequence[ModelDemand]) -> list[ModelDemand]:
    """The models waiting for an engine they do not have, most needed first."""
    wanting = [d for d in demands if not d.resident and d.waiting]
    return sorted(wanting, key=lambda d: (not d.at_risk, d.urgency, -d.waiting, d.model))


def plan_swap(
    demands: Sequence[ModelDemand],
    budget: int | None,
    now: float,
    min_residency: float,
    min_load_interval: float = 0.0,
    memory_budget: int | None = None,
    drain_grace: float = 0.0,
) -> Swap | None:
    """The next load (and the unload that makes room for it), or None: nothing waits, or no
    resident engine may give way yet. ``budget`` (engines) and ``memory_budget`` (bytes of the
    resident engines' ``memory``) None mean no limit.

    When more than one engine must go for the candidate to fit, the swap unloads the first of
    them and the next plan the next (:func:`fits` says when the load may follow)."""
    resident = [d for d in demands if d.resident]
    wanting = needed(demands)
    if not wanting:
        return None
    # Only the most needed: a less needed model taking the place it waits for would go ahead of it.
    candidate = wanting[0]
    if fits(resident, candidate, budget, memory_budget):
        return Swap(candidate.model, None, SwapReason.ROOM)
    staying, going = list(resident), []
    while not fits(staying, candidate, budget, memory_budget):
        found = _least_needed(staying, candidate, now, min_residency, min_load_interval, drain_grace)
        if found is None:
            return None  # not all that must go may: none goes (an unload alone would not help)
        going.append(found)
        staying.remove(found[0])
    victim, reason = going[0]
    return Swap(candidate.model, victim.model, reason)


def fits(
    resident: Sequence[ModelDemand], candidate: ModelDemand, budget: int | None, memory_budget: int | None
) -> bool:
    """Whether ``candidate``'s engine may be loaded beside the ``resident`` ones."""
    if budget is not None and len(resident) >= budget:
        return False
    return memory_budget is None or sum(d.memory for d in resident) + candidate.memory <= memory_budget


def _least_needed(
    resident: Sequence[ModelDemand],
    candidate: ModelDemand,
    now: float,
    min_residency: float,
    min_load_interval: float,
    drain_grace: float = 0.0,
) -> tuple[ModelDemand, SwapReason] | None:
    waited_from = now if candidate.waiting_since is None else candidate.waiting_since
    # Drained: idle throughout the last `drain_grace` seconds of the candidate's wait.
    idle = [d for d in resident if d.idle and now - max(d.idle_since, waited_from) >= drain_grace]
    if any(d.idle for d in resident) and not idle:
        return None  # an engine that may be about to drain is not preempted: wait for it
    if idle:
        # An on-demand engine before an always one; of those, the one loaded longest ago.
        return min(idle, key=lambda d: (d.always, d.since, d.model)), SwapReason.DRAINED
    if candidate.urgency.single:
        return None  # one-line requests wait for the busy engine: they never drain a batch's
    if not candidate.at_risk:
        return None  # work that will meet its deadline waits for a busy engine to drain
    if candidate.last_load is not None and now - candidate.last_load < min_load_interval:
        return None  # loaded too recently to take a busy engine's place again
    # Busy ones: those whose work is not at risk first, then the latest due.
    for victim in sorted(resident, key=lambda d: (not d.at_risk, d.urgency.deadline, d.lines), reverse=True):
        if now - victim.since < min_residency:
            continue
        if not victim.at_risk:
            return victim, SwapReason.AT_RISK
        if candidate.urgency.deadline < victim.urgency.deadline:
            return victim, SwapReason.DUE_EARLIER  # the later work cannot preempt it back
        if candidate.urgency.deadline == victim.urgency.deadline and now - victim.since >= turn_seconds(
            victim, candidate, min_residency
        ):
            return victim, SwapReason.TURN
    return None


def turn_seconds(resident: ModelDemand, candidate: ModelDemand, min_residency: float) -> float:
    """How long a busy engine keeps its place against ``candidate`` when both have work at risk
    due at the same time: ``min_residency``, longer in proportion to its queued lines against
    the candidate's."""
    share = resident.lines / max(1, candidate.lines)
    return min_residency * min(MAX_TURN_FACTOR, max(1.0, share))


__all__ = [
    "NO_DEADLINE",
    "ModelDemand",
    "Swap",
    "SwapReason",
    "Urgency",
    "fits",
    "needed",
    "plan_swap",
    "turn_seconds",
]
