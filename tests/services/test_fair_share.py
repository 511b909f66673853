"""Shares, projections and at-risk marks worked out from the queue's state; gate weights that
make shares add up over replicas."""

from app.db.repositories.queue import BatchProgress
from app.services.fair_share import RateMeter, at_risk_ids, local_weights, outlook

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


def test_local_weights_make_shares_add_up_over_replicas():
    both = {"a": {"r0", "r1"}, "b": {"r0", "r1"}}
    assert local_weights({"a": 2}, both, "r0") == {"a": 2, "b": 1}
    # b's last shards run on r0 only: it gets nearly all of r0, a runs on r1.
    lopsided = {"a": {"r0", "r1"}, "b": {"r0"}}
    r0 = local_weights({}, lopsided, "r0")
    assert r0["b"] / (r0["a"] + r0["b"]) > 0.95
    # A replica running nothing keeps the configured weights.
    assert local_weights({"a": 2}, lopsided, "r9") == {"a": 2}
