"""W6-quote's pure logic: the plan's quoted batches, each one's ratio of actual to projected
duration from its create, the median goal, and the report drawn from the results."""

from __future__ import annotations

from types import SimpleNamespace

from bench.workloads import WORKLOADS
from bench.workloads.w6.plan import Planned
from bench.workloads.w6.quote import POSITIONS, quote_plan, quoted_row, ratio_check
from bench.workloads.w6.quote_workload import W6Quote, render

CREATED = 1_000.5  # when the create call was sent


def _row(name: str, projected_finish: int | None, completed: int | None, in_progress: int = 1_001) -> dict:
    b = Planned("q1", name, "batchd-tiny-chat", 8_000, "24h")
    quote = {"lines_per_second": 400.0, "projected_start_at": 1_000, "projected_finish_at": projected_finish}
    status = "completed" if completed is not None else "in_progress"
    batch = SimpleNamespace(status=status, in_progress_at=in_progress, completed_at=completed)
    return quoted_row(b, quote, CREATED, batch, first_done=1_002.0)


def test_the_plan_quotes_four_batches_in_different_places_behind_two_running_teams():
    background, quoted = quote_plan(1.0)
    assert [b.lines for b in background] == [40_000, 40_000]
    assert {b.name for b in quoted} == set(POSITIONS)
    # One team quotes twice (behind its own batch), a background team quotes a 1h batch.
    assert [b.project for b in quoted].count("q1") == 2
    assert any(b.project == "bg-a" and b.window == "1h" for b in quoted)
    assert all(b.lines > 100 for b in quoted)  # none small: small batches go ahead on credit


def test_a_row_holds_times_after_the_create_and_actual_over_projected():
    row = _row("new-team", projected_finish=1_020, completed=1_030)
    assert (row["projected_start_s"], row["in_progress_s"], row["first_done_s"]) == (-0.5, 0.5, 1.5)
    assert (row["projected_finish_s"], row["completed_s"]) == (19.5, 29.5)
    assert row["ratio"] == round(29.5 / 19.5, 3) and row["position"] == POSITIONS["new-team"]


def test_the_goal_is_on_the_median_and_a_batch_without_a_ratio_counts_as_off():
    on_time = [_row("new-team", 1_020, 1_020), _row("behind-own", 1_020, 1_040), _row("new-large", 1_020, 1_010)]
    check = ratio_check(on_time)
    assert check["pass"] and check["measure"] == 1.0 and check["value"].startswith("1.00x (1.00, 2.03, 0.49)")
    late = [*on_time[1:], _row("ahead-of-own", None, 1_030), _row("new-team", 1_020, None)]
    assert late[2]["ratio"] is None and late[3]["ratio"] is None
    assert not ratio_check(late)["pass"]


def test_w6_quote_runs_through_the_one_harness_and_renders_each_round():
    assert isinstance(WORKLOADS["W6-quote"], W6Quote)
    rows = [_row("new-team", 1_020, 1_024), _row("new-large", 1_040, 1_036)]
    result = {
        "startup_seconds": 40.0,
        "background": [{"batch": "bg-a/day", "lines": 40_000, "window": "24h", "status": "completed"}],
        "batches": [{**r, "quotes_asked": 1} for r in rows],
        "seconds": 120.0,
        "checks": [ratio_check(rows)],
    }
    text = render({"seconds": 300.0, "rounds": [{"quote": result}, {"quote": result}]})
    assert "| quote | median actual / projected duration, created to completed |" in text
    assert text.count("| q1/new-team | a third team beside the two running | 8000 | 24h | 400.0 |") == 2
    assert "# Round 2" in text
