"""Fair share and deadlines, worked out from the queue's state: each project's share of a model,
each batch's projected finish, and which batches are at risk of missing their deadline.

A project's batches run earliest deadline first, so a batch's projected finish is now plus the
lines left in it and in the project's batches due before it, over the project's recent rate. A
batch projected to finish in the last tenth of its window (or later) is at risk: it runs ahead
of fair share until its projection is back before the last fifth (the gap keeps it from
flapping at every refresh). Used by the worker's scheduler, with rates it samples, and by the
queue view."""

from __future__ import annotations

from collections import defaultdict, deque
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field

from app.db.repositories.queue import BatchProgress

RISK_MARGIN = 0.1  # of the batch's window
CLEAR_MARGIN = 0.2
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
    as sampled from the database (every replica sees the same counters)."""

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
            if t1 - t0 >= MIN_RATE_SPAN_SECONDS:
                rates[batch_id] = max(0, done1 - done0) / (t1 - t0)
        return rates


def average_rates(batches: Iterable[BatchProgress], now: float) -> dict[str, float]:
    """Rates since each batch started, for a replica without a worker sampling recent ones."""
    return {
        b.id: b.done / (now - b.in_progress_at)
        for b in batches
        if b.in_progress_at is not None and now - b.in_progress_at >= MIN_RATE_SPAN_SECONDS
    }


def _runnable(batch: BatchProgress) -> bool:
    return batch.status == "in_progress" and batch.done < batch.total


def outlook(
    batches: Iterable[BatchProgress],
    weights: Mapping[str, float],
    rates: Mapping[str, float],
    now: float,
    was_at_risk: frozenset[str] = frozenset(),
) -> list[ProjectOutlook]:
    """Every (model, project) with batches waiting or running, with shares and projections."""
    groups: dict[tuple[str | None, str], list[BatchProgress]] = defaultdict(list)
    for batch in batches:
        groups[(batch.model, batch.project)].append(batch)
    active_weight: dict[str | None, float] = defaultdict(float)
    for (model, project), members in groups.items():
        if any(_runnable(b) for b in members):
            active_weight[model] += weights.get(project, 1)
    result = []
    for (model, project), members in sorted(groups.items(), key=lambda item: (str(item[0][0]), item[0][1])):
        weight = weights.get(project, 1)
        runnable = any(_runnable(b) for b in members)
        known = [rates[b.id] for b in members if b.id in rates]
        rate = sum(known) if known else None
        view = ProjectOutlook(project, model, weight, weight / active_weight[model] if runnable else 0.0, rate)
        ahead = 0
        for batch in sorted(members, key=lambda b: (b.expires_at, b.created_at)):
            entry = BatchOutlook(batch, rates.get(batch.id), None, False)
            if _runnable(batch):
                ahead += entry.left
                if rate:
                    entry.finish_at = now + ahead / rate
                    window = batch.expires_at - batch.created_at
                    margin = (CLEAR_MARGIN if batch.id in was_at_risk else RISK_MARGIN) * window
                    entry.at_risk = entry.finish_at > batch.expires_at - margin
            view.batches.append(entry)
        result.append(view)
    return result


def at_risk_ids(views: Iterable[ProjectOutlook]) -> frozenset[str]:
    return frozenset(b.batch.id for view in views for b in view.batches if b.at_risk)


def local_weights(
    weights: Mapping[str, float], placement: Mapping[str, set[str]], replica: str, rounds: int = 20
) -> dict[str, float]:
    """The weights one replica's engine gate should use so that each project's share of the
    whole fleet, not of each replica, follows its weight, given which replicas run shards of
    which projects (`placement`: project -> replicas). Replicas count as equal parts of the
    fleet. Iterative proportional fitting: a project that gets less than its share overall gets
    more weight wherever it runs, e.g. a project whose last shards run on one replica of two
    takes up to all of that replica while the others run on the rest."""
    replicas = sorted(set().union(*placement.values())) if placement else []
    if replica not in replicas:
        return dict(weights)
    total = sum(weights.get(p, 1) for p in placement)
    target = {p: weights.get(p, 1) / total for p in placement}
    local = {(p, r): weights.get(p, 1) for p, where in placement.items() for r in where}
    for _ in range(rounds):
        got: dict[str, float] = defaultdict(float)
        for r in replicas:
            here = {p: w for (p, r2), w in local.items() if r2 == r}
            whole = sum(here.values())
            for p, w in here.items():
                got[p] += w / whole / len(replicas)
        local = {(p, r): w * target[p] / got[p] for (p, r), w in local.items()}
    return {p: local[(p, r)] for (p, r) in local if r == replica} | {
        p: w for p, w in weights.items() if p not in placement
    }


__all__ = ["BatchOutlook", "ProjectOutlook", "RateMeter", "at_risk_ids", "average_rates", "local_weights", "outlook"]
