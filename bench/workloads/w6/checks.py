"""W6's goals, each stated as a :class:`bench.report.Check` (kept in the results as its dict)."""

from __future__ import annotations

from bench.report import Check

SMALL_LINES = 100  # a batch this small is done within SMALL_GOAL_S
SMALL_GOAL_S = 3.0
SHARE_TOLERANCE = 0.10  # relative, against the weight share
INPROCESS_TOLERANCE = 0.15
BUSY_GOAL = 0.95
RATIO_GOAL = 0.6
# Every team's first line reaches the fleet this soon after its batch is created (no team
# starved at the start; the share check runs from when all have lines at the fleet).
FIRST_LINE_GOAL_S = 3.0


def share_check(prefix: str, rows: list[dict], tolerance: float, window_s: list[float] | None) -> dict:
    """The project furthest from its weight share, over a common window of `window_s` seconds."""
    worst = max(rows, key=lambda row: 9.0 if row["relative_error"] is None else abs(row["relative_error"]))
    error = worst["relative_error"]
    seconds = round(window_s[1] - window_s[0], 1) if window_s else 0
    return Check.at_most(
        f"{prefix}worst share against weight share ({worst['project']})",
        abs(error) if error is not None else float("inf"),
        tolerance,
        goal=f"+-{tolerance:.0%}",
        value=f"{error:+.1%} over {seconds} s" if error is not None else "no common window",
        key=f"{prefix}worst share against weight share",
    ).to_dict()


def first_line_check(prefix: str, rows: list[dict]) -> dict:
    """The team whose first line reached the fleet latest after its batch was created."""
    latest = max(rows, key=lambda row: 9e9 if row["first_line_s"] is None else row["first_line_s"])
    seconds = latest["first_line_s"]
    return Check.at_most(
        f"{prefix}latest first line after creation ({latest['project']}), s",
        seconds if seconds is not None else float("inf"),
        FIRST_LINE_GOAL_S,
        value=seconds if seconds is not None else "never",
        key=f"{prefix}latest first line after creation, s",
    ).to_dict()
