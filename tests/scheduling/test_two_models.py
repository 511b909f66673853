"""Projects with work on two models get their weight shares on each model, whatever the order
their batches were created in and their deadlines, while none is at risk (issue #59): twenty
projects on a first model, five of them (created first there) also on a second.

Every rule is per model: a project's shares (fair_share.outlook), the batches that wait behind
another of their project (behind_ids), the gate's turns (gate_order) and the shards a replica
claims or gives back (admission). The last was not: a project's latest deadline here was taken
over all its models, so a batch due before the project's batch on another model counted as
urgent on its own (four shards of the batch instead of two, and its shards never gave way)."""

from __future__ import annotations

from collections import Counter

import pytest

from app.scheduling.admission import MIN_SLICE_SECONDS, SHARDS_PER_BATCH, ShardHere, Slots, next_pick
from app.scheduling.fair_share import at_risk_ids, behind_ids, outlook
from app.scheduling.gate_order import Head, capped_pass, next_project
from app.scheduling.state import BatchProgress, Claimable

NOW = 1_000_000.0
DAY, HOUR = 86_400, 3_600
FIRST, SECOND = "m1", "m2"
PROJECTS = [f"p{i:02d}" for i in range(20)]
WEIGHTS = {p: 1 if i < 10 else 2 for i, p in enumerate(PROJECTS)}
ON_SECOND = PROJECTS[:5]


def _batch(project: str, model: str, created_ago: int, window: int = DAY, total: int = 400, done: int = 100):
    created = int(NOW) - created_ago
    return BatchProgress(
        f"{project}-{model}",
        project,
        model,
        "in_progress",
        f"{window}s",
        created,
        created + window,
        created,
        total,
        done,
    )


def _queue(second_windows: dict[str, int]) -> list[BatchProgress]:
    """The issue's shape: the twenty created one a second on the first model, then the five on
    the second, in the order of `second_windows` (each with its window)."""
    batches = [_batch(p, FIRST, 60 - i) for i, p in enumerate(PROJECTS)]
    batches += [_batch(p, SECOND, 30 - i, window) for i, (p, window) in enumerate(second_windows.items())]
    return batches


ORDERS = {
    "created p00 first, all 24h": dict.fromkeys(ON_SECOND, DAY),
    "created p04 first, all 24h": dict.fromkeys(reversed(ON_SECOND), DAY),
    "created p00 first, p00 and p02 1h": {p: HOUR if p in ("p00", "p02") else DAY for p in ON_SECOND},
    "created p04 first, the first two 1h": {p: HOUR if p in ("p04", "p03") else DAY for p in reversed(ON_SECOND)},
}


def _rates(batches: list[BatchProgress]) -> dict[str, float]:
    """Each batch at its project's weight share of its model's 320 lines/s (on time: none at risk)."""
    weight = Counter[str]()
    for b in batches:
        weight[b.model or ""] += WEIGHTS[b.project]
    return {b.id: 320 * WEIGHTS[b.project] / weight[b.model or ""] for b in batches}


@pytest.mark.parametrize("order", ORDERS)
def test_each_models_shares_are_its_own_projects_weights(order):
    batches = _queue(ORDERS[order])
    views = outlook(batches, WEIGHTS, _rates(batches), NOW)
    first = {v.project: v.share for v in views if v.model == FIRST}
    second = {v.project: v.share for v in views if v.model == SECOND}
    assert first == pytest.approx({p: WEIGHTS[p] / 30 for p in PROJECTS})
    assert second == pytest.approx(dict.fromkeys(ON_SECOND, 1 / 5))
    # None at risk; no batch waits behind its project's batch on the other model.
    assert not at_risk_ids(views) and not behind_ids(views)


def _grants(heads: list[Head], weights: dict[str, float], turns: int) -> Counter[str]:
    """Slots one gate grants over `turns` turns with every project's head always waiting, as
    FairGate keeps its passes (a grant advances the clock to the project's pass, then the pass
    by 1/weight)."""
    passes = dict.fromkeys(weights, 0.0)
    clock, got = 0.0, Counter[str]()
    for _ in range(turns):
        for project in weights:
            passes[project] = capped_pass(passes[project], clock, weights[project])
        project = next_project(heads, {}, {}, weights, passes, bound=16)
        clock = passes[project]
        passes[project] += 1 / weights[project]
        got[project] += 1
    return got


@pytest.mark.parametrize("order", ORDERS)
def test_each_gate_grants_by_weight_whatever_the_heads_deadlines(order):
    batches = _queue(ORDERS[order])
    for model, projects in ((FIRST, PROJECTS), (SECOND, ON_SECOND)):
        mine = [b for b in batches if b.model == model]
        heads = [Head(b.project, b.deadline, False) for b in mine]
        weights = {p: float(WEIGHTS[p]) for p in projects}
        turns = 30 * 40
        got = _grants(heads, weights, turns)
        total = sum(weights.values())
        assert all(abs(got[p] - turns * weights[p] / total) <= 1 for p in projects), (model, got)


def _here(shard_id: int, project: str, model: str, deadline: int, age: float = 60.0, batch: str = "") -> ShardHere:
    return ShardHere(shard_id, project, batch or f"{project}-{model}", model, deadline, NOW - age)


def _pick(candidates, here, slots=Slots(8, 32)):
    return next_pick(candidates, here, [], WEIGHTS, frozenset(), lambda _model: slots, {}, NOW, 0.5)


def test_a_projects_batch_on_another_model_does_not_give_it_more_shards_here():
    # p00 and p05 each run two shards of their big first-model batch (due in a day); p00 also runs
    # its second-model batch, created later, so due later. On the first model both are at their
    # batch's two shards: neither starts a third (p00's second-model batch is not behind its
    # first-model one, they wait at different gates).
    day = int(NOW) + DAY
    here = [
        _here(1, "p00", FIRST, day),
        _here(2, "p00", FIRST, day),
        _here(3, "p05", FIRST, day),
        _here(4, "p05", FIRST, day),
        _here(5, "p00", SECOND, day + 30),
    ]
    candidates = [Claimable("p00-m1", "p00", FIRST, day, 1, False), Claimable("p05-m1", "p05", FIRST, day, 6, False)]
    assert _pick(candidates, here) is None
    counts = Counter(s.project for s in here if s.model == FIRST)
    assert counts["p00"] == counts["p05"] == SHARDS_PER_BATCH


def test_a_projects_shard_gives_way_whatever_its_batches_on_another_model():
    # The first model's 32 shard slots are full, one shard each; p00's has run longest, so it gives
    # its place to a newcomer, though p00 also runs a later batch on the second model.
    day = int(NOW) + DAY
    projects = [*PROJECTS, *(f"q{i}" for i in range(20, 32))]
    here = [_here(i, project, FIRST, day, age=MIN_SLICE_SECONDS + 100 - i) for i, project in enumerate(projects)]
    here.append(_here(99, "p00", SECOND, day + 30))
    pick = _pick([Claimable("new-m1", "new", FIRST, day + 40, 50, False)], here)
    assert pick is not None and pick.replaces == 0
