"""Which waiting project an engine slot goes to (the rule inside pipeline.fair_gate).

While several projects have lines waiting for one engine, each gets lines in proportion to its
weight: stride scheduling, a freed slot goes to the waiting project with the lowest pass, and
each grant advances its pass by 1/weight; a project back from idle starts at the pass last
granted, so it banks no credit while idle. (Counting held slots instead, as batchd did, rounds
every project up to a whole slot: at twenty teams on 32 slots a weight-1 team held one slot
where its share was 0.64, and got 40 % more than its weight.) Ties go to the project holding the
fewest slots for its weight. Lines that go ahead (a batch at risk of missing its deadline, a
small batch while its project has credit) go before every share, but one project's may hold at
most ``at_risk_max_share`` of the engine's slots that way (past it they take their fair turn),
so short windows or small batches cannot be used to take an engine from the others; they do not
advance the pass."""

from __future__ import annotations

import math
from collections.abc import Iterable, Mapping
from dataclasses import dataclass

DEFAULT_AT_RISK_MAX_SHARE = 0.5


@dataclass(frozen=True)
class Head:
    """A project's first waiting line: the earliest deadline among its waiters."""

    project: str
    deadline: float
    ahead: bool  # goes ahead of fair share


def at_risk_bound(capacity: int, max_share: float) -> int:
    """Slots one project's lines may hold ahead of fair share (at least one)."""
    return max(1, math.floor(capacity * max_share))


def capped_pass(pass_: float, clock: float, weight: float) -> float:
    """A waiting project's pass, at most one stride (1/weight) past the last pass granted. With
    steady weights that always holds, so this changes nothing; but a weight is re-read every
    second (it follows where each project's shards run, fair_share.local_weights), and one grant
    made while it was tiny would otherwise push the pass so far ahead that the project got no
    slot for minutes after its weight came back (seen in W6 on a slow host: a weight-3 team's
    shard on one replica served nothing for 50 s)."""
    return min(pass_, clock + 1.0 / max(weight, 1e-9))


def next_project(
    heads: Iterable[Head],
    held: Mapping[str, int],
    held_ahead: Mapping[str, int],
    weights: Mapping[str, float],
    passes: Mapping[str, float],
    bound: int,
) -> str:
    """The project whose head waiter gets the freed slot."""
    heads = list(heads)
    ahead = [h for h in heads if h.ahead and held_ahead.get(h.project, 0) < bound]
    if ahead:
        return min(ahead, key=lambda h: (h.deadline, h.project)).project

    def fair(h: Head) -> tuple[float, float]:
        # Slots held ahead of fair share do not count against it: an at-risk project gets the
        # bound on top of its share, not in place of it.
        mine = held.get(h.project, 0) - held_ahead.get(h.project, 0)
        return passes.get(h.project, 0.0), mine / max(weights.get(h.project, 1.0), 1e-9)

    return min(heads, key=fair).project


__all__ = ["DEFAULT_AT_RISK_MAX_SHARE", "Head", "at_risk_bound", "capped_pass", "next_project"]
