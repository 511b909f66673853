"""W10's goals, judged over the rounds (each round runs both systems on the same work):

- every 1h batch completes within its window on the budget system (every round);
- budget makespan / resident makespan <= MAKESPAN_RATIO_MAX (median of same-round ratios);
- (budget makespan - budget load seconds) / resident makespan <= WORK_RATIO_MAX (the same):
  what the budget costs beyond its loads;
- at most LOADS_MAX engine loads per round on the budget system (the worst round);
- no batch failed and no line lost or duplicated on either system (every round)."""

from __future__ import annotations

import statistics
from collections.abc import Sequence

from bench.compare import median_same_round_ratio
from bench.report import Check
from bench.workloads.w10.plan import BUDGET, RESIDENT

MAKESPAN_RATIO_MAX = 2.0
WORK_RATIO_MAX = 1.2
LOADS_MAX = 4


def _figure(round_: dict, system: str, key: str) -> float | None:
    run = round_["systems"].get(system) or {}
    return None if run.get("error") else run.get(key)


def budget_work_s(round_: dict) -> float | None:
    """The budget system's makespan less its engines' load seconds."""
    makespan, loading = _figure(round_, BUDGET, "makespan_s"), _figure(round_, BUDGET, "load_seconds")
    return None if makespan is None or loading is None else makespan - loading


def round_ratios(round_: dict) -> dict[str, float | None]:
    """This round's budget / resident makespan, and (makespan - load seconds) / resident makespan."""
    resident = _figure(round_, RESIDENT, "makespan_s")
    makespan, work = _figure(round_, BUDGET, "makespan_s"), budget_work_s(round_)
    return {
        "makespan": None if makespan is None or not resident else round(makespan / resident, 3),
        "work": None if work is None or not resident else round(work / resident, 3),
    }


def _ratio_check(name: str, rounds: Sequence[dict], key: str, bound: float) -> dict:
    budget = [_figure(r, BUDGET, "makespan_s") if key == "makespan" else budget_work_s(r) for r in rounds]
    resident = [_figure(r, RESIDENT, "makespan_s") for r in rounds]
    median = median_same_round_ratio(budget, resident)
    each = ", ".join("-" if x is None else f"{x:.2f}" for x in (round_ratios(r)[key] for r in rounds))
    return Check.at_most(
        name,
        None if median is None else round(median, 3),
        bound,
        goal=f"<= {bound}x",
        value="-" if median is None else f"{median:.2f}x ({each})",
    ).to_dict()


def goal_checks(rounds: Sequence[dict]) -> list[dict]:
    budget = [r["systems"].get(BUDGET) or {} for r in rounds]
    every = [run for r in rounds for run in r["systems"].values()]
    missed = [b for run in budget for b in run.get("hour_batches_missed", [])]
    ran = all(run and not run.get("error") for run in budget)
    worst = [run.get("worst_1h_finish_s") for run in budget]
    loads: list[int] = [run["loads"] for run in budget if run.get("loads") is not None]
    broken = sum(
        len(run.get("batches_not_completed", [])) + run.get("lines_lost", 0) + run.get("lines_duplicated", 0)
        for run in every
    )
    return [
        Check.at_most(
            "1h batches not completed within their window, budget system",
            len(missed) if ran else None,
            0,
            value=(
                f"{len(missed)}; worst 1h finish after its create "
                + ", ".join("-" if w is None else f"{w:.1f} s" for w in worst)
                + (f" (missed: {', '.join(missed)})" if missed else "")
            )
            if ran
            else "a budget run failed",
        ).to_dict(),
        _ratio_check("makespan, budget / resident (median of rounds)", rounds, "makespan", MAKESPAN_RATIO_MAX),
        _ratio_check(
            "(makespan - load seconds), budget / resident makespan (median of rounds)",
            rounds,
            "work",
            WORK_RATIO_MAX,
        ),
        Check.at_most(
            "engine loads per round, budget system (worst round)",
            max(loads) if ran and len(loads) == len(budget) else None,
            LOADS_MAX,
            value=", ".join(str(n) for n in loads) if ran else "a budget run failed",
        ).to_dict(),
        Check.at_most(
            "batches not completed + lines lost + lines duplicated, both systems",
            broken if all(not run.get("error") for run in every) else None,
            0,
            value=str(broken),
        ).to_dict(),
    ]


def median_of(rounds: Sequence[dict], system: str, key: str) -> float | None:
    """The median over rounds of one system's figure (None when a round lacks it)."""
    values = [_figure(r, system, key) for r in rounds]
    if not values or any(v is None for v in values):
        return None
    return statistics.median(v for v in values if v is not None)
