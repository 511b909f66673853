"""Which shard a replica claims next, and which of its own it gives back to make room.

Every project with work on a model should have a shard running on the replica, or its lines
never reach that model's gate and it gets no share at all. So the shard slots are per model and
sized by the engine, not one count for the whole replica: up to ``soft`` shards of a model run
freely; past it only a project with fewer than two shards of the model here (or an urgent batch)
starts one, up to ``hard`` (twice the engine's window, at most SHARD_SLOTS_CAP); at ``hard`` a
project with no shard of the model here still starts one at once by taking the place of a shard
that can best spare it: one of a project that runs several here, else the one that has run
longest, once it has run MIN_SLICE_SECONDS. Shards that give way are released with their
progress checkpointed and start again later here or elsewhere, so past ``hard`` projects take
turns in slices instead of waiting for whole shards to end.

Candidates are tried in this order: at-risk batches first (while their project's at-risk shards
of the model here are under the at-risk bound); then the project with the fewest shards of the
model here for its weight, then fewest everywhere, then the one that has waited longest here;
within a project the earliest deadline, then the oldest batch."""

from __future__ import annotations

from collections import Counter
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass

from app.scheduling.gate_order import at_risk_bound
from app.scheduling.state import Claimable, RunningShard

# A replica runs at most this many shards of one batch: two keep the engine busy while one
# drains its last lines, and leave the rest of the batch to other replicas.
SHARDS_PER_BATCH = 2
# A batch that goes ahead of others here (at risk, or due before another batch of its project on
# the same model running here) may run this many: the gates give it every slot they can, which its lines fill
# only if it always has some waiting while some of its shards drain their last lines.
SHARDS_PER_URGENT_BATCH = 4
# Past `soft` a project may still start shards until it runs this many of the model here: with
# two, one starts while the other ends, so it never leaves the gate's queue and loses its turn.
SHARDS_PER_PROJECT = 2
# Shard slots per model are twice the engine's window (the gate serves at most a window of lines
# at once, so more shards than that cannot all be served) but no more than this: each shard
# polls the database once a second.
SHARD_SLOTS_CAP = 64
# A shard runs at least this long before it gives its place to a project with none here.
MIN_SLICE_SECONDS = 3.0


@dataclass(frozen=True)
class ShardHere:
    """A shard this replica runs."""

    shard_id: int
    project: str
    batch_id: str
    model: str | None
    deadline: int  # of its batch, as Claimable.deadline
    since: float  # when this replica claimed it


@dataclass(frozen=True)
class Slots:
    soft: int
    hard: int


def shard_slots(max_running_shards: int, window: int) -> Slots:
    """A model's shard slots on a replica, from the setting and the engine's window."""
    hard = max(max_running_shards, min(2 * window, SHARD_SLOTS_CAP))
    return Slots(max_running_shards, hard)


@dataclass(frozen=True)
class Pick:
    """Claim a shard of `candidate` (with `resumed_only`, only one some replica started and gave
    back: the batch already runs its limit here); `replaces`, a shard here, gives way for it."""

    candidate: Claimable
    resumed_only: bool = False
    replaces: int | None = None


@dataclass
class _Here:
    """Counts of what runs here, by model."""

    shards: Sequence[ShardHere]

    def __post_init__(self) -> None:
        self.per_model: Counter[str | None] = Counter(s.model for s in self.shards)
        self.per_project: Counter[tuple[str | None, str]] = Counter((s.model, s.project) for s in self.shards)
        self.per_batch: Counter[str] = Counter(s.batch_id for s in self.shards)
        # The latest deadline among each project's shards of each model here. Per model: a
        # project's batches on another model are not behind this one (they wait at another
        # engine's gate), so they make none of its batches here urgent nor keep its shards from
        # giving way (keyed by project alone, a project's earlier batch on one model ran as
        # urgent, ahead of the other projects there, as soon as it had a later one on another).
        self.latest: dict[tuple[str | None, str], int] = {}
        for s in self.shards:
            key = (s.model, s.project)
            self.latest[key] = max(s.deadline, self.latest.get(key, s.deadline))


def urgent(candidate: Claimable, at_risk: bool, latest_here: Mapping[tuple[str | None, str], int]) -> bool:
    """At risk, or due before another batch of its project on the same model that runs here."""
    latest = latest_here.get((candidate.model, candidate.project), candidate.deadline)
    return at_risk or candidate.deadline < latest


def next_pick(
    candidates: Sequence[Claimable],
    here: Sequence[ShardHere],
    everywhere: Sequence[RunningShard],
    weights: Mapping[str, float],
    at_risk: frozenset[str],
    slots: Callable[[str | None], Slots],
    waited_since: Mapping[tuple[str | None, str], float],
    now: float,
    at_risk_max_share: float,
    me: str = "",
) -> Pick | None:
    """The next shard to claim here, on replica `me` (and the shard to give back for it), or None."""
    mine = _Here(here)
    elsewhere: Counter[tuple[str | None, str]] = Counter()
    replicas: dict[str | None, set[str]] = {}  # replicas running shards of each model
    batch_on: dict[str, set[str]] = {}  # replicas running shards of each batch
    for shard in everywhere:
        elsewhere[(shard.model, shard.project)] += shard.count
        replicas.setdefault(shard.model, set()).add(shard.replica)
        batch_on.setdefault(shard.batch_id, set()).add(shard.replica)

    def left_for_others(c: Claimable) -> bool:
        """A second shard of a batch waits for the other replicas serving its model to take one
        first: spread, a batch gets every replica's gate, not one replica's share of the fleet
        (a 1h batch behind its project's 24h one would otherwise run on one replica of two)."""
        if c.resumed or mine.per_batch[c.batch_id] == 0:
            return False
        return bool(replicas.get(c.model, set()) - batch_on.get(c.batch_id, set()) - {me})

    at_risk_here: Counter[tuple[str | None, str]] = Counter((s.model, s.project) for s in here if s.batch_id in at_risk)

    def at_risk_ok(c: Claimable) -> bool:
        bound = at_risk_bound(slots(c.model).hard, at_risk_max_share)
        return c.batch_id in at_risk and at_risk_here[(c.model, c.project)] < bound

    def key(c: Claimable) -> tuple:
        weight = max(weights.get(c.project, 1.0), 1e-9)
        return (
            not at_risk_ok(c),
            mine.per_project[(c.model, c.project)] / weight,
            elsewhere[(c.model, c.project)] / weight,
            waited_since.get((c.model, c.project), 0.0),
            c.deadline,
            c.seq,
        )

    for c in sorted(candidates, key=key):
        hurry = urgent(c, c.batch_id in at_risk, mine.latest)
        limit = SHARDS_PER_URGENT_BATCH if hurry else SHARDS_PER_BATCH
        at_limit = mine.per_batch[c.batch_id] >= limit
        if (at_limit and not c.resumed) or left_for_others(c):
            continue
        running, project_here = mine.per_model[c.model], mine.per_project[(c.model, c.project)]
        room = slots(c.model)
        if running < room.soft:
            return Pick(c, at_limit)
        ahead = project_here < SHARDS_PER_PROJECT or (hurry and mine.per_batch[c.batch_id] < SHARDS_PER_PROJECT)
        if running < room.hard:
            if ahead:
                return Pick(c, at_limit)
            continue
        if project_here == 0 or at_risk_ok(c):
            victim = _victim([s for s in here if s.model == c.model], mine, weights, at_risk, now, c.project)
            if victim is not None:
                return Pick(c, at_limit, victim)
    return None


def _victim(
    shards: Sequence[ShardHere],
    mine: _Here,
    weights: Mapping[str, float],
    at_risk: frozenset[str],
    now: float,
    newcomer: str,
) -> int | None:
    """The shard of a model that gives its place to a newcomer project: a non-urgent shard of
    the project that runs the most shards here for its weight (if that is more than one), else
    the non-urgent shard that has run longest, once it has run its slice."""
    movable = [
        s
        for s in shards
        if s.batch_id not in at_risk
        and s.project != newcomer
        and s.deadline >= mine.latest.get((s.model, s.project), s.deadline)
        and now - s.since >= MIN_SLICE_SECONDS
    ]
    if not movable:
        return None

    def crowding(s: ShardHere) -> float:
        return mine.per_project[(s.model, s.project)] / max(weights.get(s.project, 1.0), 1e-9)

    crowded = [s for s in movable if mine.per_project[(s.model, s.project)] > 1]
    if crowded:
        return max(crowded, key=lambda s: (crowding(s), s.deadline, -s.since)).shard_id
    return min(movable, key=lambda s: s.since).shard_id


__all__ = [
    "MIN_SLICE_SECONDS",
    "SHARDS_PER_BATCH",
    "SHARDS_PER_PROJECT",
    "SHARDS_PER_URGENT_BATCH",
    "SHARD_SLOTS_CAP",
    "Pick",
    "ShardHere",
    "Slots",
    "next_pick",
    "shard_slots",
]
