"""Which model's engine is loaded next under --max-resident-engines, and which gives way."""

from __future__ import annotations

from app.scheduling.residency import MAX_TURN_FACTOR, ModelDemand, Swap, Urgency, needed, plan_swap, turn_seconds

NOW = 1_000.0
HOUR, DAY = Urgency(deadline=3_600.0), Urgency(deadline=86_400.0)
AT_RISK = Urgency(ahead=True, deadline=86_400.0)


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


# -- Single-request lanes and the rate of swaps (#54) ---------------------------------------

SINGLE = Urgency(deadline=NOW + 60, single=True)  # a background response or flex request, due in 60 s


def _loaded(model, since=NOW - 3_600, last_load=None):
    """Resident and busy with a 24h batch (it has lines running and more queued)."""
    return ModelDemand(model, True, since, 64, 500, DAY, True, last_load)


def _asking(model, urgency, last_load=None, waiting=1):
    return ModelDemand(model, False, 0.0, 0, waiting, urgency, False, last_load)


def test_swap_rules_for_single_request_lanes_and_recent_loads():
    # (resident engine, model asking, plan): one row per rule, min_residency 30 s, min_load_interval 60 s.
    rows = [
        # One-line requests never drain a busy engine, however long it has had it, however due they are.
        (_loaded("a"), _asking("b", SINGLE), None),
        (_loaded("a"), _asking("b", Urgency(ahead=True, deadline=NOW, single=True)), None),
        # ... but take an idle engine's place, or room in the budget, at once.
        (_resident("a", since=NOW), _asking("b", SINGLE), Swap("b", "a")),
        # A batch's lines still preempt by deadline (after the minimum residency) ...
        (_loaded("a"), _asking("b", HOUR), Swap("b", "a")),
        (_loaded("a"), _asking("b", HOUR, last_load=NOW - 61), Swap("b", "a")),
        # ... unless their model was loaded on demand less than min_load_interval ago.
        (_loaded("a"), _asking("b", HOUR, last_load=NOW - 59), None),
        (_loaded("a"), _asking("b", AT_RISK, last_load=NOW - 59), None),
        (_loaded("a"), _asking("b", DAY, last_load=NOW - 59, waiting=5_000), None),
        # An idle engine gives way even to a model loaded a moment ago: no one's batch waits.
        (_resident("a"), _asking("b", HOUR, last_load=NOW - 1), Swap("b", "a")),
    ]
    for resident, asking, plan in rows:
        assert plan_swap([resident, asking], 1, NOW, 30.0, 60.0) == plan, (resident, asking)
    # Room in the budget: nothing to preempt, no limit.
    assert plan_swap([_loaded("a"), _asking("b", SINGLE, last_load=NOW - 1)], 2, NOW, 30.0, 60.0) == Swap("b")


def test_a_batch_line_beside_single_requests_speaks_for_its_model():
    # The model's urgency is its batch's (the engine code ranks it so); single only when alone.
    with_batch = _asking("b", HOUR, waiting=2)
    assert plan_swap([_loaded("a"), with_batch], 1, NOW, 30.0, 60.0) == Swap("b", "a")


def _simulate(seconds: int, arrivals, min_load_interval: float, answer_seconds: int = 1) -> tuple[int, int]:
    """Model `a` runs a 24h batch that never runs dry; `arrivals(t)` says whether a line of `b`
    (its Urgency) arrives at second t, answered `answer_seconds` after its engine is loaded.
    The swap rules run every second, a load takes no time. (loads of b, seconds `a` was resident)."""
    resident, since, last_load = "a", 0.0, {"a": None, "b": None}
    waiting_b: list[Urgency] = []
    running_b: list[tuple[int, Urgency]] = []  # when each running line of b ends, and its urgency
    loads_b = a_seconds = 0
    for t in range(seconds):
        urgency = arrivals(t)
        if urgency is not None:
            waiting_b.append(urgency)
        running_b = [(end, u) for end, u in running_b if end > t]
        if resident == "b" and waiting_b:
            running_b += [(t + answer_seconds, u) for u in waiting_b]
            waiting_b = []
        b_urgency = min(waiting_b + [u for _, u in running_b], default=Urgency())
        demands = [
            ModelDemand("a", resident == "a", since, 64 if resident == "a" else 0, 500, DAY, True, last_load["a"]),
            ModelDemand("b", resident == "b", since, len(running_b), len(waiting_b), b_urgency, False, last_load["b"]),
        ]
        swap = plan_swap(demands, 1, float(t), 30.0, min_load_interval)
        if swap is not None:
            resident, since = swap.load, float(t)
            last_load[swap.load] = float(t)
            loads_b += swap.load == "b"
        a_seconds += resident == "a"
    return loads_b, a_seconds


def _single_at(t: int) -> Urgency:
    return Urgency(deadline=t + 60.0, single=True)


def test_background_responses_every_35_s_to_another_model_never_swap_out_a_busy_engine():
    loads, a_seconds = _simulate(3_600, lambda t: _single_at(t) if t % 35 == 0 and t else None, 60.0)
    assert (loads, a_seconds) == (0, 3_600)  # before #54: a load of b every 35 s, 102 in the hour


def test_one_line_batches_every_35_s_to_another_model_swap_at_most_once_a_min_load_interval():
    one_hour_batch = lambda t: Urgency(deadline=t + 3_600.0) if t % 35 == 0 and t else None  # noqa: E731
    loads, a_seconds = _simulate(3_600, one_hour_batch, 60.0)
    # Deadlines preempt, but b is loaded at most once a minute: the 24h batch keeps most of the hour.
    assert 0 < loads <= 3_600 / 60, loads
    unlimited, a_unlimited = _simulate(3_600, one_hour_batch, 0.0)
    assert unlimited > loads and a_seconds > a_unlimited, (unlimited, loads, a_seconds, a_unlimited)
