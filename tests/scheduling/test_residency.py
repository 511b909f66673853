"""Which model's engine is loaded next under --max-resident-engines, and which gives way."""

from __future__ import annotations

from dataclasses import replace

from app.core.statuses import BatchStatus
from app.scheduling.fair_share import at_risk_ids, outlook
from app.scheduling.residency import (
    MAX_TURN_FACTOR,
    ModelDemand,
    Swap,
    SwapReason,
    Urgency,
    fits,
    needed,
    plan_swap,
    turn_seconds,
)
from app.scheduling.state import BatchProgress

NOW = 1_000.0
HOUR, DAY = Urgency(deadline=3_600.0), Urgency(deadline=86_400.0)
AT_RISK = Urgency(ahead=True, deadline=86_400.0)


def _resident(model, since=NOW - 60, in_flight=0, waiting=0, urgency=DAY, always=True, at_risk=False):
    return ModelDemand(model, True, since, in_flight, waiting, urgency, always, None, at_risk)


def _wanting(model, waiting=10, urgency=DAY, always=True, at_risk=False, last_load=None):
    return ModelDemand(model, False, 0.0, 0, waiting, urgency, always, last_load, at_risk)


def _plan(*demands, budget=1, min_residency=30.0, min_load_interval=0.0):
    return plan_swap(list(demands), budget, NOW, min_residency, min_load_interval)


def test_nothing_waits_nothing_loads():
    assert _plan(_resident("a", in_flight=5), ModelDemand("b", False)) is None


def test_room_in_the_budget_loads_without_unloading():
    assert _plan(_resident("a", in_flight=5), _wanting("b"), budget=2) == Swap("b")
    assert plan_swap([_wanting("b")], None, NOW, 30.0).reason is SwapReason.ROOM


def test_an_idle_engine_gives_way_at_once_even_just_loaded():
    swap = _plan(_resident("a", since=NOW), _wanting("b"))
    assert swap == Swap("b", "a") and swap.reason is SwapReason.DRAINED


def test_an_idle_engine_gives_way_once_idle_for_the_grace_of_the_others_wait():
    """BATCHD_ENGINE_DRAIN_GRACE_SECONDS (10 s here): the engine loaded at start, idle, does not
    give way the moment another model's lines wait (its own batch, created a moment later, may
    still be validating: W10 saw that swap 2 s in), nor in a gap between its shards; it does
    once it has had no line for the grace while the other's lines waited."""

    def plan(idle_since, waiting_since, now):
        a = replace(_resident("a", since=0.0), idle_since=idle_since)
        b = replace(_wanting("b"), waiting_since=waiting_since)
        return plan_swap([a, b], 1, now, 30.0, drain_grace=10.0)

    # Idle since its load long ago; b's lines wait from 100 s on: not before 110 s.
    assert plan(idle_since=0.0, waiting_since=100.0, now=105.0) is None
    assert plan(idle_since=0.0, waiting_since=100.0, now=110.0) == Swap("b", "a", SwapReason.DRAINED)
    # Its last line ended at 104 s, while b waited: ten seconds from then.
    assert plan(idle_since=104.0, waiting_since=100.0, now=113.0) is None
    assert plan(idle_since=104.0, waiting_since=100.0, now=114.0) == Swap("b", "a", SwapReason.DRAINED)
    # An engine still inside its grace is not preempted for work at risk either: it is about to drain.
    a = replace(_resident("a", since=0.0), idle_since=104.0)
    late = replace(_wanting("b", urgency=HOUR, at_risk=True), waiting_since=100.0)
    assert plan_swap([a, late], 1, 110.0, 30.0, drain_grace=10.0) is None


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


# -- The rule of #58: a busy engine stays while nothing waiting is at risk --------------------


def test_residency_rules_table():
    """(resident engine, model waiting, plan and its reason): one row per rule, budget 1,
    min_residency 30 s, min_load_interval 60 s."""
    busy_day = _resident("embed", since=NOW - 3_600, in_flight=64, waiting=2_000, urgency=DAY)
    rows = [
        # A busy engine is kept while nothing waiting is at risk: not for an earlier deadline,
        # not for more lines, however long it has been resident.
        (busy_day, _wanting("chat", urgency=HOUR), None),
        (busy_day, _wanting("chat", waiting=50_000, urgency=DAY), None),
        (busy_day, _wanting("chat", urgency=AT_RISK, at_risk=False), None),  # granted ahead on credit, not at risk
        # A waiting model at risk preempts it once it has had the minimum residency ...
        (busy_day, _wanting("chat", urgency=HOUR, at_risk=True), (Swap("chat", "embed"), SwapReason.AT_RISK)),
        (
            _resident("embed", since=NOW - 30, in_flight=64, urgency=DAY),
            _wanting("chat", urgency=HOUR, at_risk=True),
            (Swap("chat", "embed"), SwapReason.AT_RISK),
        ),
        # ... whatever the deadlines: at-risk 24h work preempts 1h work that is on time.
        (
            _resident("chat", since=NOW - 30, in_flight=16, urgency=HOUR),
            _wanting("embed", urgency=DAY, at_risk=True),
            (Swap("embed", "chat"), SwapReason.AT_RISK),
        ),
        # ... but not before.
        (
            _resident("embed", since=NOW - 29, in_flight=64, urgency=DAY),
            _wanting("chat", urgency=HOUR, at_risk=True),
            None,
        ),
        # ... nor when its model was loaded on demand less than min_load_interval ago.
        (busy_day, _wanting("chat", urgency=HOUR, at_risk=True, last_load=NOW - 59), None),
        (
            busy_day,
            _wanting("chat", urgency=HOUR, at_risk=True, last_load=NOW - 61),
            (Swap("chat", "embed"), SwapReason.AT_RISK),
        ),
        # Both at risk: only work due earlier preempts (and the later never preempts it back) ...
        (
            _resident("embed", since=NOW - 30, in_flight=64, urgency=DAY, at_risk=True),
            _wanting("chat", urgency=HOUR, at_risk=True),
            (Swap("chat", "embed"), SwapReason.DUE_EARLIER),
        ),
        (
            _resident("chat", since=NOW - 3_600, in_flight=16, urgency=HOUR, at_risk=True),
            _wanting("embed", urgency=DAY, at_risk=True),
            None,
        ),
        # ... or, due together, once the busy engine's turn is over (twice the minimum: 20 lines to 10).
        (_resident("a", since=NOW - 59, in_flight=20, at_risk=True), _wanting("b", at_risk=True), None),
        (
            _resident("a", since=NOW - 60, in_flight=20, at_risk=True),
            _wanting("b", at_risk=True),
            (Swap("b", "a"), SwapReason.TURN),
        ),
        # A drained engine gives way to waiting work, at risk or not, just loaded or not.
        (_resident("embed", since=NOW), _wanting("chat", urgency=DAY), (Swap("chat", "embed"), SwapReason.DRAINED)),
        (
            _resident("embed", since=NOW, at_risk=True),
            _wanting("chat", last_load=NOW - 1),
            (Swap("chat", "embed"), SwapReason.DRAINED),
        ),
    ]
    for resident, waiting, expected in rows:
        swap = _plan(resident, waiting, min_load_interval=60.0)
        assert (swap, swap and swap.reason) == (expected and expected[0], expected and expected[1]), (resident, waiting)


def test_a_1h_batch_created_after_a_24h_batch_on_another_model_is_loaded_when_at_risk_not_before():
    """Second by second: the 24h batch runs on `embed` (loaded for it); a 1h batch of `chat`
    arrives 2 s later. It waits while it is on time, and `chat` is loaded the second it is at risk."""
    embed = lambda t: _resident("embed", since=NOW, in_flight=64, waiting=5_000, urgency=DAY)  # noqa: E731
    risky_from = 1_200  # when the scheduler's projection says the 1h batch would miss its deadline
    loaded_at = None
    for t in range(2, 3_600):
        chat = _wanting("chat", waiting=100, urgency=HOUR, at_risk=t >= risky_from)
        swap = plan_swap([embed(t), chat], 1, NOW + t, 30.0, 60.0)
        if swap is not None:
            loaded_at = t
            assert swap == Swap("chat", "embed") and swap.reason is SwapReason.AT_RISK
            break
    assert loaded_at == risky_from


def test_the_rule_keeps_the_same_order_when_the_at_risk_state_changes_between_plans():
    """Whether a batch is at risk is read at each plan: the same lines, first on time (no swap),
    then at risk (a swap), then on time again (no swap back for them alone)."""
    busy = _resident("embed", since=NOW - 600, in_flight=64, urgency=DAY)
    assert _plan(busy, _wanting("chat", urgency=HOUR)) is None
    assert _plan(busy, _wanting("chat", urgency=HOUR, at_risk=True)) == Swap("chat", "embed")
    chat_loaded = _resident("chat", since=NOW - 600, in_flight=16, urgency=HOUR)
    assert _plan(chat_loaded, _wanting("embed", waiting=5_000)) is None


def test_more_queued_lines_earn_a_longer_turn_within_a_cap():
    busy, few = _resident("a", in_flight=30, waiting=10), _wanting("b", waiting=10)
    assert turn_seconds(busy, few, 30.0) == 120.0  # four times the candidate's lines
    assert turn_seconds(busy, _wanting("b", waiting=400), 30.0) == 30.0  # never below the minimum
    assert turn_seconds(_resident("a", in_flight=10_000), few, 30.0) == 30.0 * MAX_TURN_FACTOR
    risky = _wanting("b", waiting=10, at_risk=True)
    assert _plan(_resident("a", since=NOW - 100, in_flight=30, waiting=10, at_risk=True), risky) is None
    assert _plan(_resident("a", since=NOW - 120, in_flight=30, waiting=10, at_risk=True), risky) == Swap("b", "a")


def test_the_most_needed_model_loads_first():
    demands = [
        _wanting("late", waiting=500, urgency=DAY),
        _wanting("soon", waiting=1, urgency=HOUR),
        _wanting("risky", waiting=1, urgency=DAY, at_risk=True),
        _wanting("late-but-more", waiting=900, urgency=DAY),
        _resident("loaded", since=NOW - 30, in_flight=1, urgency=HOUR, waiting=1),
    ]
    # At risk first, then the earliest deadline, then the most lines.
    assert [d.model for d in needed(demands)] == ["risky", "soon", "late-but-more", "late"]
    assert _plan(*demands) == Swap("risky", "loaded")
    # Without it: nothing waiting is at risk, the busy engine stays.
    assert _plan(*[d for d in demands if d.model != "risky"]) is None


def test_a_line_reads_its_batch_at_risk_state_when_asked_not_when_it_was_granted():
    at_risk: set[str] = set()
    line = Urgency(deadline=3_600.0, batch_id="batch_1", risk=at_risk.__contains__)
    assert not line.at_risk()
    at_risk.add("batch_1")
    assert line.at_risk()
    # Lines of two batches stay apart (the engine code counts them by urgency), ranked alike.
    other = Urgency(deadline=3_600.0, batch_id="batch_2", risk=at_risk.__contains__)
    assert line != other and not line < other and not other < line
    # Without a lookup, a line granted ahead counts as at risk; a single request never does.
    assert Urgency(ahead=True).at_risk() and not Urgency(ahead=True, single=True).at_risk()


# -- Single-request lanes and the rate of swaps (#54) ---------------------------------------

SINGLE = Urgency(deadline=NOW + 60, single=True)  # a background response or flex request, due in 60 s


def _loaded(model, since=NOW - 3_600, last_load=None):
    """Resident and busy with a 24h batch (it has lines running and more queued)."""
    return ModelDemand(model, True, since, 64, 500, DAY, True, last_load)


def _asking(model, urgency, last_load=None, waiting=1):
    # At risk as its line says (granted ahead; a single request never is).
    return ModelDemand(model, False, 0.0, 0, waiting, urgency, False, last_load, urgency.at_risk())


RISKY_HOUR = Urgency(ahead=True, deadline=3_600.0)


def test_swap_rules_for_single_request_lanes_and_recent_loads():
    # (resident engine, model asking, plan): one row per rule, min_residency 30 s, min_load_interval 60 s.
    rows = [
        # One-line requests never drain a busy engine, however long it has had it, however due they are.
        (_loaded("a"), _asking("b", SINGLE), None),
        (_loaded("a"), _asking("b", Urgency(ahead=True, deadline=NOW, single=True)), None),
        # ... but take an idle engine's place, or room in the budget, at once.
        (_resident("a", since=NOW), _asking("b", SINGLE), Swap("b", "a")),
        # An at-risk batch's lines preempt (after the minimum residency); on time, they wait ...
        (_loaded("a"), _asking("b", RISKY_HOUR), Swap("b", "a")),
        (_loaded("a"), _asking("b", HOUR), None),
        (_loaded("a"), _asking("b", RISKY_HOUR, last_load=NOW - 61), Swap("b", "a")),
        # ... and not when their model was loaded on demand less than min_load_interval ago.
        (_loaded("a"), _asking("b", RISKY_HOUR, last_load=NOW - 59), None),
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
    with_batch = _asking("b", RISKY_HOUR, waiting=2)
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
        b_lines = waiting_b + [u for _, u in running_b]
        b_urgency, b_risk = min(b_lines, default=Urgency()), any(u.at_risk() for u in b_lines)
        demands = [
            ModelDemand("a", resident == "a", since, 64 if resident == "a" else 0, 500, DAY, True, last_load["a"]),
            ModelDemand(
                "b", resident == "b", since, len(running_b), len(waiting_b), b_urgency, False, last_load["b"], b_risk
            ),
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
    # At risk as they come (the worst case: each is projected to miss its hour).
    one_hour_batch = lambda t: Urgency(ahead=True, deadline=t + 3_600.0) if t % 35 == 0 and t else None  # noqa: E731
    loads, a_seconds = _simulate(3_600, one_hour_batch, 60.0)
    # At-risk work preempts, but b is loaded at most once a minute: the 24h batch keeps most of the hour.
    assert 0 < loads <= 3_600 / 60, loads
    unlimited, a_unlimited = _simulate(3_600, one_hour_batch, 0.0)
    assert unlimited > loads and a_seconds > a_unlimited, (unlimited, loads, a_seconds, a_unlimited)


def test_one_line_batches_on_time_never_swap_out_a_busy_engine():
    on_time = lambda t: Urgency(deadline=t + 3_600.0) if t % 35 == 0 and t else None  # noqa: E731
    assert _simulate(3_600, on_time, 60.0) == (0, 3_600)  # before #58: a load of b every minute


def test_with_the_schedulers_projection_a_1h_batch_behind_a_24h_one_loads_when_it_would_miss_its_hour():
    """The rule and the projection together (fair_share.outlook, as the scheduler runs it): a
    24h batch of 200,000 lines runs on `embed` at 30 lines/s; a 1h batch of 600 lines for
    `chat` (which last served 1 line/s) arrives. `chat` stays unloaded while its batch is
    projected on time and is loaded once it is at risk: with 600 s of work and 360 s of margin,
    about 2,640 s after it arrived, in time for its hour; and the 24h batch is never at risk."""
    start = 1_000_000
    embed = BatchProgress("e1", "p", "embed", BatchStatus.IN_PROGRESS, "24h", start, start + 86_400, start, 200_000, 0)
    chat = BatchProgress("c1", "p", "chat", BatchStatus.IN_PROGRESS, "1h", start + 2, start + 3_602, start + 2, 600, 0)
    loaded_at, at_risk = None, frozenset()
    for t in range(2, 3_600):
        now = float(start + t)
        running = replace(embed, done=30 * t)
        views = outlook([running, chat], {}, {"e1": 30.0, "c1": 0.0}, now, at_risk, served={"chat": 1.0})
        at_risk = at_risk_ids(views)
        assert "e1" not in at_risk
        demands = [
            ModelDemand(
                "embed", True, start, 64, 5_000, Urgency(deadline=embed.deadline), True, start, "e1" in at_risk
            ),
            ModelDemand("chat", False, 0.0, 0, 600, Urgency(deadline=chat.deadline), True, None, "c1" in at_risk),
        ]
        swap = plan_swap(demands, 1, now, 30.0, 60.0)
        if swap is not None:
            assert swap == Swap("chat", "embed") and swap.reason is SwapReason.AT_RISK
            loaded_at = t
            break
    assert loaded_at is not None and abs(loaded_at - 2 - 2_640) <= 2, loaded_at
    # Loaded then, at 1 line/s it finishes 600 s later, inside its hour.
    assert start + loaded_at + 600 <= chat.deadline


# -- A memory budget (--engine-memory-budget): room is what the resident engines' needs leave ---

GIB = 1 << 30


def _sized(demand: ModelDemand, gib: float) -> ModelDemand:
    return replace(demand, memory=int(gib * GIB))


def test_memory_budget_rules_table():
    """(demands, count limit, memory budget in GiB, plan): one row per rule."""
    busy = _sized(_resident("a", in_flight=5, waiting=50), 4)
    idle = _sized(_resident("a"), 4)
    b = _sized(_wanting("b"), 4)
    rows = [
        # Both fit: the next loads beside the busy one, nothing unloaded (it finishes its lines).
        ([busy, b], None, 8, Swap("b", None, SwapReason.ROOM)),
        # Only one fits: the busy engine stays while nothing waiting is at risk, as with a count ...
        ([busy, b], None, 6, None),
        # ... and gives way once drained, or to work at risk.
        ([idle, b], None, 6, Swap("b", "a", SwapReason.DRAINED)),
        ([busy, replace(b, at_risk=True)], None, 6, Swap("b", "a", SwapReason.AT_RISK)),
        # The count limit, given too, still holds: room in memory is not room in the count.
        ([busy, b], 1, 8, None),
        ([idle, b], 1, 64, Swap("b", "a", SwapReason.DRAINED)),
        # A model needing more than all the budget never loads (the registry refuses it at start).
        ([_sized(_wanting("b"), 9)], None, 8, None),
    ]
    for demands, budget, memory_gib, plan in rows:
        swap = plan_swap(demands, budget, NOW, 30.0, 0.0, memory_gib * GIB)
        assert (swap, swap and swap.reason) == (plan, plan and plan.reason), (demands, budget, memory_gib)


def test_when_two_engines_must_go_each_swap_unloads_one_and_the_load_waits_until_it_fits():
    a, c = _sized(_resident("a", since=NOW - 100), 4), _sized(_resident("c", since=NOW - 50), 4)
    b = _sized(_wanting("b"), 8)
    assert plan_swap([a, c, b], None, NOW, 30.0, 0.0, 10 * GIB) == Swap("b", "a")  # the oldest idle first
    assert not fits([c], b, None, 10 * GIB)  # one gone is not room yet: the load waits ...
    assert plan_swap([replace(a, resident=False), c, b], None, NOW, 30.0, 0.0, 10 * GIB) == Swap("b", "c")
    assert fits([], b, None, 10 * GIB)  # ... for the next swap
    # If not every engine that must go may (c is busy and b's work is on time), none goes.
    busy_c = replace(c, in_flight=5)
    assert plan_swap([a, busy_c, b], None, NOW, 30.0, 0.0, 10 * GIB) is None
