"""Which waiting project a freed engine slot goes to."""

from __future__ import annotations

from app.scheduling.gate_order import Head, at_risk_bound, next_project


def test_the_lowest_pass_goes_next_whatever_the_slots_held():
    # A weight-1 project holding one slot is not rounded down to none: its pass decides.
    heads = [Head("light", 10, False), Head("heavy", 10, False)]
    assert next_project(heads, {"light": 0, "heavy": 3}, {}, {"heavy": 4}, {"light": 5.0, "heavy": 4.75}, 4) == "heavy"


def test_on_equal_passes_the_project_holding_fewest_slots_for_its_weight_goes_next():
    heads = [Head("a", 10, False), Head("b", 20, False), Head("c", 5, False)]
    assert next_project(heads, {"a": 4, "b": 1, "c": 2}, {}, {}, {}, bound=4) == "b"
    # b weighs 4: one slot per weight is 0.25 held, c's 2 of weight 1 is more.
    assert next_project(heads, {"a": 4, "b": 2, "c": 2}, {}, {"b": 4}, {}, bound=4) == "b"


def test_ties_go_round_by_pass():
    heads = [Head("a", 10, False), Head("b", 20, False)]
    assert next_project(heads, {}, {}, {}, {"a": 2.0, "b": 1.0}, bound=4) == "b"


def test_an_at_risk_head_goes_ahead_until_its_project_holds_the_bound():
    heads = [Head("a", 10, False), Head("late", 99, True)]
    assert next_project(heads, {"late": 3}, {"late": 3}, {}, {}, bound=4) == "late"
    assert next_project(heads, {"late": 4}, {"late": 4}, {}, {}, bound=4) == "a"  # past it: fair share


def test_the_at_risk_bound_is_a_share_of_the_slots_and_at_least_one():
    assert at_risk_bound(32, 0.5) == 16
    assert at_risk_bound(1, 0.5) == 1


def test_slots_held_ahead_do_not_count_against_fair_share():
    # late holds 4 slots ahead (the bound) and 1 in its fair turn; a holds 2: late's fair turn.
    heads = [Head("a", 10, False), Head("late", 99, True)]
    assert next_project(heads, {"a": 2, "late": 5}, {"late": 4}, {}, {}, bound=4) == "late"
    assert next_project(heads, {"a": 2, "late": 7}, {"late": 4}, {}, {}, bound=4) == "a"
