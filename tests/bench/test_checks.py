"""Every workload states its goals as bench.report.Check: judged by its rule, kept in the JSON as
a dict, shown as check, value, goal and result."""

from __future__ import annotations

from bench.report import Check, checks_table


def test_a_check_is_judged_by_its_rule_bounds_included():
    assert Check.at_most("p99 (ms)", 250.0, 250).passed is True
    assert Check.at_least("lines/s over the bare client's", 0.59, 0.6).passed is False
    assert Check.within("team-b's share", 0.40, 0.40, 0.60).passed is True
    assert Check.at_most("not measured", None, 1.0).passed is None


def test_a_check_shows_its_value_and_goal_in_the_one_table():
    checks = [
        Check.at_most("RSS growth (MB)", 76.0, 100, goal="<= 100 MB", value="76 MB / 48 MB").to_dict(),
        Check.at_least("ratio", 0.59, 0.6).to_dict(),
        Check.at_least("server: lines/s vs limit", None, 0.95, value="–").to_dict(),
    ]
    assert checks[1] == {
        "check": "ratio",
        "key": "ratio",
        "value": 0.59,
        "goal": ">= 0.6",
        "measure": 0.59,
        "rule": ["min", 0.6],
        "pass": False,
    }
    assert checks_table(checks) == [
        "| check | value | goal | result |",
        "|---|---|---|---|",
        "| RSS growth (MB) | 76 MB / 48 MB | <= 100 MB | pass |",
        "| ratio | 0.59 | >= 0.6 | **FAIL** |",
        "| server: lines/s vs limit | – | >= 0.95 | n/a |",
    ]
