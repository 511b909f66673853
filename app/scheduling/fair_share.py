"""Fair share and deadlines, worked out from the queue's state: each project's share of a model,
each batch's projected finish, and which batches are at risk of missing their deadline.

A project's batches run earliest deadline first, so a batch's projected finish is now plus the
lines left in it and in the project's batches due before it, over the project's recent rate. A
project that has stalled (a measured rate of 0) is projected at its fair share of what its
model serves; when the model serves nothing either (its engine is not loaded: engines on
demand; or it restarts), at its fair share of what the model served when it last served (or a
prior: its throughput in recently finished batches, or in its running ones so far), so that its
batches are at risk only when their deadline is really in danger at that rate; with no such
rate known, at once. A batch projected to finish in the last tenth of its window (or later) is at risk: it runs ahead of fair
share (up to a bound, see gate_order) until its projection is back before the last fifth (the
gap keeps it from flapping at every refresh). Used by the worker's scheduler, with rates it
samples, and by the queue view."""

from __future__ import annotations

import math
from collections import defaultdict, deque
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field

from app.scheduling.state import BatchProgress, RunningShard

RISK_MARGIN = 0.1  # of the batch's window
# A batch of at most this many lines is small: its lines may go ahead of fair share while its
# project has small-batch credit left (app.scheduling.credit).
SMALL_BATCH_LINES = 100
# A batch due this much of its window after another of its project waits behind it (behind_ids).
BEHIND_MARGIN = 0.1
CLEAR_MARGIN = 0.2
# A batch whose model has no rate to project it at (it never served here: no rate, no history)
# counts as at risk once it has waited this much of its window (BATCHD_AT_RISK_UNKNOWN_RATE_WAIT):
# projected at nothing it would be at risk at once, and every model a fresh server has not served
# yet would preempt a busy engine (W10 at 7e40890: five loads a round where two drain every model
# in turn).
UNKNOWN_RATE_WAIT = 0.25
# Rates are measured over this much recent time, long enough to smooth a shard's start.
RATE_WINDOW_SECONDS = 10.0
MIN_RATE_SPAN_SECONDS = 2.0


@dataclass
class BatchOutlook:
    batch: BatchProgress
    rate: float | None  # lines/s lately; None until measured
    finish_at: float | None  # projected; None while the project's rate is unknown
    at_risk: bool

    @property
    def left(self) -> int:
        return max(0, self.batch.total - self.batch.done)


@dataclass
class ProjectOutlook:
    project: str
    model: str | None
    weight: float
    share: float  # its fair fraction of the model while the others with work keep theirs
    rate: float | None
    batches: list[BatchOutlook] = field(default_factory=list)


class RateMeter:
    """Lines per second of each batch over the last RATE_WINDOW_SECONDS, from its done counter
    as sampled from the database (every replica sees the same counters); 0 only after a whole
    window without progress."""

    def __init__(self) -> None:
        self._samples: dict[str, deque[tuple[float, int]]] = {}

    def observe(self, now: float, batches: Iterable[BatchProgress]) -> None:
        seen = set()
        for batch in batches:
            seen.add(batch.id)
            samples = self._samples.setdefault(batch.id, deque())
            samples.append((now, batch.done))
            while len(samples) > 2 and now - samples[1][0] >= RATE_WINDOW_SECONDS:
                samples.popleft()
        for gone in set(self._samples) - seen:
            del self._samples[gone]

    def rates(self) -> dict[str, float]:
        rates = {}
        for batch_id, samples in self._samples.items():
            (t0, done0), (t1, done1) = samples[0], samples[-1]
            # No progress counts as a stall (rate 0) only over a whole window: a line that takes a
            # few seconds is not one.
            span_needed = MIN_RATE_SPAN_SECONDS if done1 > done0 else RATE_WINDOW_SECONDS
            if t1 - t0 >= span_needed:
                rates[batch_id] = max(0, done1 - done0) / (t1 - t0)
        return rates


def average_rates(batches: Iterable[BatchProgress], now: float) -> dict[str, float]:
    """Rates since each batch started, for a replica without a worker sampling recent ones."""
    return {
        b.id: b.done / (now - b.in_progress_at)
        for b in batches
        if b.in_progress_at is not None and now - b.in_progress_at >= MIN_RATE_SPAN_SECONDS
    }


def outlook(
    batches: Iterable[BatchProgress],
    weights: Mapping[str, float],
    rates: Mapping[str, float],
    now: float,
    was_at_risk: frozenset[str] = frozenset(),
    served: Mapping[str | None, float] | None = None,
    unknown_rate_wait: float = UNKNOWN_RATE_WAIT,
) -> list[ProjectOutlook]:
    """Every (model, project) with batches waiting or running, with shares and projections.
    ``served`` is each model's rate (lines/s) when it last served, or a prior: what a model that
    serves nothing now is projected at; with neither, a batch is at risk once it has waited
    ``unknown_rate_wait`` of its window."""
    groups: dict[tuple[str | None, str], list[BatchProgress]] = defaultdict(list)
    for batch in batches:
        groups[(batch.model, batch.project)].append(batch)
    active_weight: dict[str | None, float] = defaultdict(float)
    for (model, project), members in groups.items():
        if any(b.runnable for b in members):
            active_weight[model] += weights.get(project, 1)
    model_rate: dict[str | None, float] = defaultdict(float)
    for batch in batches:
        model_rate[batch.model] += rates.get(batch.id, 0.0)
    result = []
    for (model, project), members in sorted(groups.items(), key=lambda item: (str(item[0][0]), item[0][1])):
        weight = weights.get(project, 1)
        runnable = any(b.runnable for b in members)
        known = [rates[b.id] for b in members if b.id in rates]
        rate = sum(known) if known else None
        share = weight / active_weight[model] if runnable else 0.0
        view = ProjectOutlook(project, model, weight, share, rate)
        # A stalled project is projected at its fair share of its model; when the model serves
        # nothing now (unloaded, restarting), of what it last served (0 if nothing is known: then
        # it is at risk once it has waited `unknown_rate_wait` of its window).
        serving = model_rate[model] if model_rate[model] > 0 else (served or {}).get(model, 0.0)
        projected = share * serving if rate == 0 else rate
        ahead = 0
        for batch in sorted(members, key=lambda b: (b.deadline, b.created_at)):
            entry = BatchOutlook(batch, rates.get(batch.id), None, False)
            if batch.runnable:
                ahead += entry.left
                window = batch.deadline - batch.created_at
                if projected is not None and projected > 0:
                    entry.finish_at = now + ahead / projected
                    margin = (CLEAR_MARGIN if batch.id in was_at_risk else RISK_MARGIN) * window
                    entry.at_risk = entry.finish_at > batch.deadline - margin
                elif projected is not None:  # nothing to project it at
                    entry.finish_at = math.inf
                    entry.at_risk = now - batch.created_at >= unknown_rate_wait * window
            view.batches.append(entry)
        result.append(view)
    return result


def model_rates(batches: Iterable[BatchProgress], rates: Mapping[str, float]) -> dict[str | None, float]:
    """What each model serves now (lines/s): its batches' measured rates added up."""
    total: dict[str | None, float] = defaultdict(float)
    for batch in batches:
        total[batch.model] += rates.get(batch.id, 0.0)
    return dict(total)


def at_risk_ids(views: Iterable[ProjectOutlook]) -> frozenset[str]:
    return frozenset(b.batch.id for view in views for b in view.batches if b.at_risk)


def small_batch_ids(views: Iterable[ProjectOutlook]) -> frozenset[str]:
    """Runnable batches of at most SMALL_BATCH_LINES lines."""
    return frozenset(
        b.batch.id for view in views for b in view.batches if b.batch.runnable and b.batch.total <= SMALL_BATCH_LINES
    )


def behind_ids(views: Iterable[ProjectOutlook]) -> frozenset[str]:
    """Runnable batches whose project has another runnable batch (not a small one) on the same
    model due earlier by more than BEHIND_MARGIN of their own window (a 24h batch while a 1h one runs; not ten 24h
    batches created minutes apart): their lines wait behind the earlier one's wherever each runs."""
    behind = set()
    for view in views:
        runnable = [b.batch for b in view.batches if b.batch.runnable]
        # A small batch goes ahead on credit anyway: it does not put the others behind.
        big = [b for b in runnable if b.total > SMALL_BATCH_LINES]
        if len(runnable) < 2 or not big:
            continue
        earliest = min(b.deadline for b in big)
        for batch in runnable:
            if batch.deadline - earliest > BEHIND_MARGIN * (batch.deadline - batch.created_at):
                behind.add(batch.id)
    return frozenset(behind)


def local_weights(
    weights: Mapping[str, float],
    running: Iterable[RunningShard],
    replica: str,
    rounds: int = 20,
    shared: Callable[[str | None], bool] = lambda model: False,
) -> tuple[dict[tuple[str | None, str], float], dict[str | None, float]]:
    """The weights one replica's engine gates should use, per (model, project), so that each
    project's share of a model across the whole fleet, not of each replica, follows its weight,
    given where the shards of that model run; and, for a model `shared` by every replica (an
    upstream fleet), the part of its window this replica should use (absent: all of it).

    Replicas count as equal parts of a fleet (each keeps its window full): iterative proportional
    fitting gives a project that gets less than its share overall more weight wherever it runs.
    Where the shards are placed so that no weights can add up (a replica holding the shards of
    only a few small projects of the model would give them its whole part), the replicas of a
    shared fleet stop being equal parts: each project's weight is split evenly over the replicas
    it runs on, and a replica whose projects add up to less than another's uses that much less
    of its window, so it sends the fleet less. A (model, project) with no shard here is absent
    (its configured weight applies)."""
    placement: dict[str | None, dict[str, set[str]]] = defaultdict(lambda: defaultdict(set))
    for shard in running:
        placement[shard.model][shard.project].add(shard.replica)
    result: dict[tuple[str | None, str], float] = {}
    window_parts: dict[str | None, float] = {}
    for model, where in placement.items():
        fitted, error = _fit(weights, where, replica, rounds)
        if error > FIT_TOLERANCE and shared(model):
            fitted, part = _even_split(weights, where, replica)
            window_parts[model] = part
        for project, weight in fitted.items():
            result[(model, project)] = weight
    return result, window_parts


# Fitted weights further than this (relative) from every project's share count as no fit.
FIT_TOLERANCE = 0.02


def _targets(weights: Mapping[str, float], placement: Mapping[str, set[str]]) -> dict[str, float]:
    total = sum(weights.get(p, 1) for p in placement)
    return {p: weights.get(p, 1) / total for p in placement}


def _fit(
    weights: Mapping[str, float], placement: Mapping[str, set[str]], replica: str, rounds: int
) -> tuple[dict[str, float], float]:
    """Weights here with replicas as equal parts, and how far the fit leaves the worst project
    from its share (relative)."""
    replicas = sorted(set().union(*placement.values()))
    if replica not in replicas:
        return {}, 0.0
    target = _targets(weights, placement)
    local = {(p, r): weights.get(p, 1) for p, where in placement.items() for r in where}
    for _ in range(rounds):
        got = _shares_of(local, replicas)
        local = {(p, r): w * target[p] / got[p] for (p, r), w in local.items()}
    got = _shares_of(local, replicas)
    error = max(abs(got[p] / target[p] - 1) for p in target)
    return {p: w for (p, r), w in local.items() if r == replica}, error


def _shares_of(local: Mapping[tuple[str, str], float], replicas: list[str]) -> dict[str, float]:
    got: dict[str, float] = defaultdict(float)
    for r in replicas:
        here = {p: w for (p, r2), w in local.items() if r2 == r}
        whole = sum(here.values())
        for p, w in here.items():
            got[p] += w / whole / len(replicas)
    return got


def _even_split(
    weights: Mapping[str, float], placement: Mapping[str, set[str]], replica: str
) -> tuple[dict[str, float], float]:
    """Each project's weight split evenly over its replicas: the weights here, and this replica's
    part of its window (the sum of its weights against the largest replica's). Only for a
    replica in the placement (_fit finds no error for one that is not)."""
    parts: dict[str, float] = defaultdict(float)
    here: dict[str, float] = {}
    for project, where in placement.items():
        for r in where:
            parts[r] += weights.get(project, 1) / len(where)
            if r == replica:
                here[project] = weights.get(project, 1) / len(where)
    return here, parts[replica] / max(parts.values())


__all__ = [
    "BatchOutlook",
    "ProjectOutlook",
    "RateMeter",
    "at_risk_ids",
    "average_rates",
    "behind_ids",
    "small_batch_ids",
    "local_weights",
    "model_rates",
    "outlook",
]
