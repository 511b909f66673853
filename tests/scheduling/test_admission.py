"""Which shard a replica claims next, and which of its own gives way for it."""

from __future__ import annotations

from app.scheduling.admission import (
    MIN_SLICE_SECONDS,
    SHARD_SLOTS_CAP,
    ShardHere,
    Slots,
    next_pick,
    shard_slots,
)
from app.scheduling.state import Claimable, RunningShard

NOW = 1_000_000.0
DAY = int(NOW) + 86_400


def _c(project, batch=None, model="m", deadline=DAY, seq=0, resumed=False):
    return Claimable(batch or f"{project}-b", project, model, deadline, seq, resumed)


def _here(shard_id, project, batch=None, model="m", deadline=DAY, age=60.0):
    return ShardHere(shard_id, project, batch or f"{project}-b", model, deadline, NOW - age)


def _pick(candidates, here=(), slots=Slots(8, 32), at_risk=frozenset(), weights=None, waited=None, share=0.5):
    return next_pick(candidates, list(here), [], weights or {}, at_risk, lambda _model: slots, waited or {}, NOW, share)


def test_slots_per_model_grow_with_the_engine_window_up_to_a_cap():
    assert shard_slots(8, 32) == Slots(8, 64)
    assert shard_slots(8, 8) == Slots(8, 16)
    assert shard_slots(8, 1000).hard == SHARD_SLOTS_CAP
    assert shard_slots(8, 1) == Slots(8, 8)


def test_a_project_with_no_shard_here_goes_before_one_with_shards():
    here = [_here(1, "a"), _here(2, "a", "a-b2")]
    pick = _pick([_c("a", "a-b3", seq=1), _c("z", seq=9)], here)
    assert pick is not None and pick.candidate.project == "z"


def test_past_the_soft_limit_only_projects_with_fewer_than_two_shards_start_one():
    here = [_here(i, f"p{i}") for i in range(8)] + [_here(10, "p0", "p0-b2")]
    assert _pick([_c("p0", "p0-b3")], here) is None  # p0 runs two here already
    pick = _pick([_c("p1", "p1-b2")], here)
    assert pick is not None and pick.replaces is None


def test_forty_teams_all_get_a_shard_on_one_replica_of_an_engine_with_a_window_of_32():
    here: list[ShardHere] = []
    candidates = [_c(f"team{n:02}", seq=n) for n in range(40)]
    slots = shard_slots(8, 32)
    for shard_id in range(40):
        pick = _pick(candidates, here, slots=slots)
        assert pick is not None and pick.replaces is None
        here.append(_here(shard_id, pick.candidate.project, pick.candidate.batch_id))
        candidates = [c for c in candidates if c.project != pick.candidate.project]
    assert len({s.project for s in here}) == 40


def test_past_the_slots_teams_take_turns_by_who_waited_longest():
    # 64 teams hold every slot of the model; two more wait, the one waiting longest goes first.
    here = [_here(i, f"p{i}", age=MIN_SLICE_SECONDS + i) for i in range(64)]
    waited = {("m", "late"): NOW - 5, ("m", "later"): NOW - 1}
    pick = _pick([_c("later", seq=1), _c("late", seq=2)], here, slots=shard_slots(8, 32), waited=waited)
    assert pick is not None and pick.candidate.project == "late" and pick.replaces == 63


def test_slots_are_per_model():
    # m is full; a project's batch on model n still starts at once.
    here = [_here(i, f"p{i}", model="m") for i in range(32)]
    pick = _pick([_c("q", model="n")], here)
    assert pick is not None and pick.replaces is None


def test_at_the_hard_limit_a_newcomer_takes_the_place_of_a_crowded_project():
    here = [_here(i, f"p{i}") for i in range(30)] + [_here(30, "p0", "p0-b2"), _here(31, "p0", "p0-b3")]
    pick = _pick([_c("new")], here)
    assert pick is not None and pick.candidate.project == "new" and pick.replaces in (0, 30, 31)


def test_at_the_hard_limit_a_newcomer_takes_the_longest_running_shard_after_its_slice():
    here = [_here(i, f"p{i}", age=MIN_SLICE_SECONDS + i) for i in range(32)]
    pick = _pick([_c("new")], here)
    assert pick is not None and pick.replaces == 31
    fresh = [_here(i, f"p{i}", age=MIN_SLICE_SECONDS / 2) for i in range(32)]
    assert _pick([_c("new")], fresh) is None  # nobody has had its slice yet


def test_an_at_risk_or_urgent_shard_does_not_give_way():
    here = [_here(i, f"p{i}", age=100.0 - i) for i in range(32)]
    pick = _pick([_c("new")], here, at_risk=frozenset({"p0-b"}))
    assert pick is not None and pick.replaces == 1


def test_at_risk_batches_go_first_up_to_the_at_risk_bound():
    slots = Slots(8, 4)
    assert (
        _pick([_c("a", seq=0), _c("late", seq=5)], at_risk=frozenset({"late-b"}), slots=slots).candidate.project
        == "late"
    )
    here = [_here(1, "late", "late-b"), _here(2, "late", "late-b")]  # 2 of 4 slots: the bound at 0.5
    pick = _pick(
        [_c("a", seq=0), _c("late", "late-c", seq=5)], here, at_risk=frozenset({"late-b", "late-c"}), slots=slots
    )
    assert pick.candidate.project == "a"


def test_who_waited_longest_goes_first_among_equals():
    waited = {("m", "a"): NOW - 1, ("m", "b"): NOW - 30}
    pick = _pick([_c("a", seq=0), _c("b", seq=1)], waited=waited)
    assert pick.candidate.project == "b"


def test_a_batch_at_its_shard_limit_only_resumes_a_given_back_shard():
    here = [_here(1, "a"), _here(2, "a")]
    assert _pick([_c("a")], here) is None
    pick = _pick([_c("a", resumed=True)], here)
    assert pick is not None and pick.resumed_only


def test_a_second_shard_of_a_batch_waits_for_the_other_replicas_serving_the_model():
    here = [_here(1, "a", "hour")]
    others = [RunningShard("b", "m", "r1", 1, "day")]  # r1 serves m but runs no shard of "hour"
    pick = next_pick([_c("a", "hour")], here, others, {}, frozenset(), lambda _m: Slots(8, 32), {}, NOW, 0.5, "r0")
    assert pick is None
    # Once r1 runs one of its shards too, r0 takes its second.
    both = [*others, RunningShard("a", "m", "r1", 1, "hour"), RunningShard("a", "m", "r0", 1, "hour")]
    pick = next_pick([_c("a", "hour")], here, both, {}, frozenset(), lambda _m: Slots(8, 32), {}, NOW, 0.5, "r0")
    assert pick is not None and pick.candidate.batch_id == "hour"
    # Alone on the model, or a shard given back: no waiting.
    mine = [RunningShard("a", "m", "r0", 1, "hour")]
    assert next_pick([_c("a", "hour")], here, mine, {}, frozenset(), lambda _m: Slots(8, 32), {}, NOW, 0.5, "r0")
    resumed = _c("a", "hour", resumed=True)
    assert next_pick([resumed], here, others, {}, frozenset(), lambda _m: Slots(8, 32), {}, NOW, 0.5, "r0")
