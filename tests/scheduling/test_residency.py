"""Which model's engine is loaded next under --max-resident-engines, and which gives way."""

from __future__ import annotations

from app.scheduling.residency import MAX_TURN_FACTOR, ModelDemand, Swap, Urgency, needed, plan_swap, turn_seconds

NOW = 1_000.0
HOUR, DAY = Urgency(deadline=3_600.0), Urgency(deadline=86_400.0)
AT_RISK = Urgency(relaxed=False, deadline=86_400.0)


def _resident(model, since=NOW - 60, in_flight=0, waiting=0, urgency=DAY, always=True):
    return ModelDemand(model, True, since, in_flight, waiting, urgency, always)


def _wanting(model, waiting=10, urgency=DAY, always=True):
    return ModelDemand(model, False, 0.0, 0, waiting, urgency, always)


def _plan(*demands, budget=1, min_residency=30.0):
    return plan_swap(list(demands), budget, NOW, min_residency)


def test_nothing_waits_nothing_loads():
    assert _plan(_resident("a", in_flight=5), ModelDemand("b", False)) is None


def test_room_in_the_budget_loads_without_unloading():
    assert _plan(_resident("a", in_flight=5), _wanting("b"), budget=2) == Swap("b")
    assert plan_swap([_wanting("b")], None, NOW, 30.0) == Swap("b")


def test_an_idle_engine_gives_way_at_once_even_just_loaded():
    assert _plan(_resident("a", since=NOW), _wanting("b")) == Swap("b", "a")


def test_the_idle_on_demand_engine_goes_before_an_idle_always_one_then_the_oldest():
    demands = [
        _resident("old-always", since=NOW - 100),
        _resident("new-on-demand", since=NOW - 5, always=False),
        _resident("busy", in_flight=3),
        _wanting("c"),
    ]
    assert _plan(*demands, budget=3) == Swap("c", "new-on-demand")
    demands[1] = _resident("older-always", since=NOW - 200)
    assert _plan(*demands, budget=3) == Swap("c", "older-always")


def test_an_earlier_deadline_preempts_a_busy_engine_once_it_has_had_the_minimum_residency():
    busy = _resident("embed", since=NOW - 30, in_flight=64, waiting=200, urgency=DAY)
    assert _plan(busy, _wanting("chat", urgency=HOUR)) == Swap("chat", "embed")
    # Not its full turn (its lines outnumber the chat lines 26 to 1), only the minimum.
    assert turn_seconds(busy, _wanting("chat"), 30.0) > 30.0


def test_a_just_loaded_busy_engine_is_not_swapped_out_even_for_at_risk_work():
    busy = _resident("embed", since=NOW - 29, in_flight=64, urgency=DAY)
    assert _plan(busy, _wanting("chat", urgency=HOUR)) is None
    assert _plan(busy, _wanting("chat", urgency=AT_RISK)) is None


def test_a_later_deadline_waits_for_its_turn_and_never_preempts_back():
    busy = _resident("chat", since=NOW - 10, in_flight=16, urgency=HOUR)
    assert _plan(busy, _wanting("embed", waiting=64, urgency=DAY)) is None


def test_at_risk_work_preempts_work_due_earlier_that_is_not_at_risk():
    busy = _resident("chat", since=NOW - 30, in_flight=16, urgency=HOUR)
    assert _plan(busy, _wanting("embed", urgency=AT_RISK)) == Swap("embed", "chat")
    assert (
        _plan(_resident("embed", since=NOW - 30, in_flight=40, urgency=AT_RISK), _wanting("chat", urgency=HOUR)) is None
    )


def test_equal_deadlines_take_turns_of_at_least_the_minimum_residency():
    assert _plan(_resident("a", since=NOW - 29, in_flight=10), _wanting("b", waiting=10)) is None
    assert _plan(_resident("a", since=NOW - 30, in_flight=10), _wanting("b", waiting=10)) == Swap("b", "a")


def test_more_queued_lines_earn_a_longer_turn_within_a_cap():
    busy, few = _resident("a", in_flight=30, waiting=10), _wanting("b", waiting=10)
    assert turn_seconds(busy, few, 30.0) == 120.0  # four times the candidate's lines
    assert turn_seconds(busy, _wanting("b", waiting=400), 30.0) == 30.0  # never below the minimum
    assert turn_seconds(_resident("a", in_flight=10_000), few, 30.0) == 30.0 * MAX_TURN_FACTOR
    assert _plan(_resident("a", since=NOW - 100, in_flight=30, waiting=10), few) is None
    assert _plan(_resident("a", since=NOW - 120, in_flight=30, waiting=10), few) == Swap("b", "a")


def test_the_most_needed_model_loads_first():
    demands = [
        _wanting("late", waiting=500, urgency=DAY),
        _wanting("soon", waiting=1, urgency=HOUR),
        _wanting("risky", waiting=1, urgency=AT_RISK),
        _wanting("late-but-more", waiting=900, urgency=DAY),
        _resident("loaded", since=NOW - 30, in_flight=1, urgency=HOUR, waiting=1),
    ]
    # At risk first, then the earliest deadline, then the most lines.
    assert [d.model for d in needed(demands)] == ["risky", "soon", "late-but-more", "late"]
    assert _plan(*demands) == Swap("risky", "loaded")
    # Without it: "soon" is due no earlier than the loaded engine's lines, whose turn (twice
    # the minimum: two lines against one) is not over.
    assert _plan(*[d for d in demands if d.model != "risky"]) is None
