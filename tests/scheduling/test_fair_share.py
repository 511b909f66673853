"""Shares, projections and at-risk marks worked out from the queue's state; gate weights that
make shares add up over replicas."""

import math

import pytest

from app.scheduling.fair_share import (
    RateMeter,
    at_risk_ids,
    behind_ids,
    local_weights,
    outlook,
    small_batch_ids,
)
from app.scheduling.state import BatchProgress, RunningShard

NOW = 1_000_000.0


def _batch(batch_id, project, window_s, total, done=0, age_s=10, status="in_progress"):
    created = int(NOW - age_s)
    return BatchProgress(
        batch_id, project, "m", status, f"{window_s}s", created, created + window_s, created + 1, total, done
    )


def test_shares_follow_the_weights_of_the_projects_with_work():
    batches = [_batch("a1", "a", 86400, 100), _batch("a2", "a", 86400, 100), _batch("b1", "b", 86400, 100)]
    views = {v.project: v for v in outlook(batches, {"a": 2}, {}, NOW)}
    assert views["a"].share == 2 / 3 and views["b"].share == 1 / 3
    # A project whose batches are still validating has no runnable work: no share yet.
    batches.append(_batch("c1", "c", 86400, 0, status="validating"))
    assert {v.project: v.share for v in outlook(batches, {"a": 2}, {}, NOW)}["c"] == 0


def test_projection_is_earliest_deadline_first_within_a_project():
    day, hour = _batch("day", "a", 86400, 1000), _batch("hour", "a", 3600, 1000)
    [view] = outlook([day, hour], {}, {"day": 10.0, "hour": 10.0}, NOW)
    finish = {b.batch.id: b.finish_at for b in view.batches}
    assert finish["hour"] == NOW + 1000 / 20 and finish["day"] == NOW + 2000 / 20
    assert not at_risk_ids([view])


def test_a_batch_projected_into_the_last_tenth_of_its_window_is_at_risk_until_back_before_the_last_fifth():
    # 100 s window, created 50 s ago: deadline in 50 s.
    late = _batch("late", "b", 100, 1000, done=0, age_s=50)
    assert at_risk_ids(outlook([late], {}, {"late": 20.0}, NOW))  # done in 50 s: past 90 % of the window
    assert not at_risk_ids(outlook([late], {}, {"late": 40.0}, NOW))  # 25 s left
    # Once at risk it stays until its projection is before the last fifth (30 s from now here).
    assert at_risk_ids(outlook([late], {}, {"late": 30.0}, NOW, frozenset({"late"})))
    assert not at_risk_ids(outlook([late], {}, {"late": 40.0}, NOW, frozenset({"late"})))
    # Without a measured rate nothing is projected, so nothing is at risk.
    assert not at_risk_ids(outlook([late], {}, {}, NOW))


def test_rates_come_from_recent_samples_of_the_done_counter():
    meter = RateMeter()
    for second in range(30):
        meter.observe(NOW + second, [_batch("x", "a", 86400, 10_000, done=second * 5 + (second > 20) * second * 5)])
    assert meter.rates()["x"] > 5  # the last ten seconds, faster than the average since start
    meter.observe(NOW + 31, [])
    assert meter.rates() == {}


def _placed(model, where):
    return [RunningShard(project, model, replica) for project, replicas in where.items() for replica in replicas]


def test_local_weights_make_shares_add_up_over_replicas():
    both = _placed("m", {"a": {"r0", "r1"}, "b": {"r0", "r1"}})
    assert local_weights({"a": 2}, both, "r0")[0] == {("m", "a"): 2, ("m", "b"): 1}
    # b's last shards run on r0 only: it gets nearly all of r0, a runs on r1.
    lopsided = _placed("m", {"a": {"r0", "r1"}, "b": {"r0"}})
    r0, parts = local_weights({}, lopsided, "r0")
    assert parts == {}  # a fit: every replica keeps its whole window
    assert r0[("m", "b")] / (r0[("m", "a")] + r0[("m", "b")]) > 0.95
    # A replica running nothing keeps the configured weights.
    assert local_weights({"a": 2}, lopsided, "r9") == ({}, {})


def test_local_weights_are_fitted_per_model():
    # On model m, b runs only on r0; on model n, a and b both run on both replicas. b's
    # correction on m must not leak into n.
    running = _placed("m", {"a": {"r0", "r1"}, "b": {"r0"}}) + _placed("n", {"a": {"r0", "r1"}, "b": {"r0", "r1"}})
    r0 = local_weights({}, running, "r0")[0]
    assert r0[("m", "b")] / (r0[("m", "a")] + r0[("m", "b")]) > 0.95
    assert r0[("n", "a")] == r0[("n", "b")] == 1


def test_where_no_weights_add_up_a_shared_fleets_replica_sends_less():
    # W6's second model: r1 holds only t17 (weight 1) and part of t16 (4), while t01, t06 and t11
    # (1, 2, 3) run on r0 alone. r0's projects need 7/11 of the fleet with t16 nowhere else: no
    # weights fit replicas as equal parts (t17 would get about twice its share).
    weights = {"t01": 1, "t06": 2, "t11": 3, "t16": 4, "t17": 1}
    where = {"t01": {"r0"}, "t06": {"r0"}, "t11": {"r0"}, "t16": {"r0", "r1"}, "t17": {"r1"}}
    running = _placed("m", where)
    fitted = {r: local_weights(weights, running, r, shared=lambda model: model == "m") for r in ("r0", "r1")}
    parts = {r: fitted[r][1].get("m", 1.0) for r in fitted}
    assert parts["r0"] == 1.0 and parts["r1"] == pytest.approx(3 / 8)  # (2 + 1) against (1 + 2 + 3 + 2)
    # Each replica's part of the fleet follows its window, each project's part of a replica its weight there.
    share: dict[str, float] = {}
    for r, (local, _) in fitted.items():
        here = {p: w for (_, p), w in local.items()}
        for p, w in here.items():
            share[p] = share.get(p, 0) + parts[r] / sum(parts.values()) * w / sum(here.values())
    assert share == pytest.approx({p: w / 11 for p, w in weights.items()})
    # The same placement on a replica's own engine (not shared): the fit as before, whole windows.
    assert local_weights(weights, running, "r1")[1] == {}


def test_a_stalled_project_is_projected_at_its_fair_share_of_its_model():
    # 1h window, 30 min left, 1000 lines left; b is stalled (rate 0) while a runs at 10 lines/s.
    a = _batch("a1", "a", 86400, 100_000)
    b = _batch("b1", "b", 3600, 1000, age_s=1800)
    # Its fair half of 10 lines/s finishes it in 200 s: on time.
    assert not at_risk_ids(outlook([a, b], {}, {"a1": 10.0, "b1": 0.0}, NOW))
    # The whole model stalled and nothing known of it: the 1h batch has waited half its window
    # (at risk), the 24h one seconds of its day (not yet).
    assert at_risk_ids(outlook([a, b], {}, {"a1": 0.0, "b1": 0.0}, NOW)) == {"b1"}
    # A fair half of 0.5 lines/s (2,000 s) misses the deadline: at risk.
    assert "b1" in at_risk_ids(outlook([a, b], {}, {"a1": 0.5, "b1": 0.0}, NOW))


def test_no_progress_is_a_stall_only_over_a_whole_window():
    meter = RateMeter()
    for second in range(5):
        meter.observe(NOW + second, [_batch("x", "a", 86400, 100)])
    assert "x" not in meter.rates()  # 4 s without a finished line: not known yet
    for second in range(5, 12):
        meter.observe(NOW + second, [_batch("x", "a", 86400, 100)])
    assert meter.rates()["x"] == 0


def test_small_batches_are_the_runnable_ones_of_at_most_a_hundred_lines():
    small = _batch("s1", "s", 86400, 60)
    big = _batch("b1", "s", 86400, 6000)
    tail = _batch("t1", "t", 86400, 300, done=250)  # the last lines of a big batch: not small
    done = _batch("d1", "d", 86400, 60, done=60)
    waiting = _batch("w1", "w", 86400, 0, status="validating")  # its size is not known yet
    assert small_batch_ids(outlook([small, big, tail, done, waiting], {}, {}, NOW)) == {"s1"}


def test_a_later_batch_waits_behind_its_projects_much_earlier_one_only():
    day = _batch("day", "a", 86400, 1000, age_s=600)
    hour = _batch("hour", "a", 3600, 1000)
    days = [_batch(f"d{n}", "b", 86400, 1000, age_s=600 - 60 * n) for n in range(5)]  # minutes apart
    other = _batch("other", "c", 3600, 1000)
    assert behind_ids(outlook([day, hour, *days, other], {}, {}, NOW)) == {"day"}
    # Once the hour batch is done the day batch is no longer behind.
    finished = _batch("hour", "a", 3600, 1000, done=1000)
    assert behind_ids(outlook([day, finished], {}, {}, NOW)) == frozenset()


def test_a_small_batch_does_not_put_its_projects_big_batch_behind():
    day = _batch("day", "a", 86400, 5000, age_s=600)
    small_hour = _batch("hour", "a", 3600, 100)
    assert behind_ids(outlook([day, small_hour], {}, {}, NOW)) == frozenset()


def test_an_unloaded_models_stalled_batches_are_projected_at_its_last_served_rate():
    """Engines on demand (#58): a model with no engine loaded serves nothing, so its waiting
    batches stall (rate 0). At the rate it last served (or a prior), they are at risk only when
    their deadline is really in danger; with no rate known, once they have waited a quarter of
    their window."""
    b = _batch("b1", "b", 3600, 1000, age_s=1800)  # 1h window, 30 min left, 1000 lines left
    stalled = {"b1": 0.0}
    assert at_risk_ids(outlook([b], {}, stalled, NOW)) == {"b1"}  # nothing known, half its hour gone
    for age_s, at_risk in ((10, False), (899, False), (900, True)):  # a quarter of its hour: 900 s
        young = _batch("y1", "b", 3600, 1000, age_s=age_s)
        [view] = outlook([young], {}, {"y1": 0.0}, NOW)
        assert (view.batches[0].finish_at, view.batches[0].at_risk) == (math.inf, at_risk), age_s
        # Told to wait for nothing (BATCHD_AT_RISK_UNKNOWN_RATE_WAIT=0): at risk at once.
        [view] = outlook([young], {}, {"y1": 0.0}, NOW, unknown_rate_wait=0.0)
        assert view.batches[0].at_risk
    # Last served 10 lines/s: 100 s of work, on time; 0.5 lines/s: 2,000 s, it would miss it.
    assert not at_risk_ids(outlook([b], {}, stalled, NOW, served={"m": 10.0}))
    [view] = outlook([b], {}, stalled, NOW, served={"m": 10.0})
    assert view.batches[0].finish_at == pytest.approx(NOW + 100)
    assert at_risk_ids(outlook([b], {}, stalled, NOW, served={"m": 0.5})) == {"b1"}
    # Its fair share of it, beside another project's stalled batch (half of 10 lines/s: 200 s).
    a = _batch("a1", "a", 86400, 100_000)
    views = {v.project: v for v in outlook([a, b], {}, {"a1": 0.0, "b1": 0.0}, NOW, served={"m": 10.0})}
    assert views["b"].batches[0].finish_at == pytest.approx(NOW + 200)
    # A model that serves now is projected at what it serves, not at what it served.
    assert at_risk_ids(outlook([a, b], {}, {"a1": 0.5, "b1": 0.0}, NOW, served={"m": 10.0})) >= {"b1"}
