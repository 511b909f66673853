"""Shares of a fleet's lines, read from its request log (each line's ``user`` field names its
project and batch)."""

from __future__ import annotations

from bench.workloads.w6.plan import Planned
from harness.tenancy import Request, busy_fraction, project_of, shares

WINDOW_S = 5.0
# Lines admitted before the last team's batch was created (up to batchd's window) go first:
# shares are measured from this long after the last creation.
SETTLE_S = 1.0


def windows(log: list[Request], start: float, end: float) -> list[dict]:
    """Each project's share of every WINDOW_S-second window from ``start`` to ``end``."""
    rows = []
    t = start
    while t < end:
        rows.append(
            {"from_s": round(t - start, 1), **{p: round(v, 3) for p, v in shares(log, t, t + WINDOW_S).items()}}
        )
        t += WINDOW_S
    return rows


def model_shares(
    log: list[Request],
    plan: list[Planned],
    model: str,
    created: dict[Planned, float],
    exists: dict[Planned, float],
    weights: dict[str, int],
    slots: int,
) -> dict:
    """Each project's share of `model`'s lines while all the projects with a batch on it from the
    start have work at the fleet (from SETTLE_S after the last of them had a line served, or
    after the last of their batches existed if later, to the first one's last line), against
    its weight share among them; a team with only a late batch is left out. Small batches' lines
    are not counted: they go ahead of fair share by design (the small-batch credit)."""
    mine = [b for b in plan if b.model == model and not b.late]
    projects = sorted({b.project for b in mine})
    first_created = {p: min(created[b] for b in mine if b.project == p) for p in projects}
    small_tags = {f"{b.project}/{b.name}" for b in plan if b.small}
    by_project: dict[str, list[Request]] = {p: [] for p in projects}
    for r in log:
        if project_of(r.tag) in by_project and r.tag not in small_tags:
            by_project[project_of(r.tag)].append(r)
    served_from = max((min(r.started for r in rs) for rs in by_project.values() if rs), default=0.0)
    start = max(max(exists[b] for b in mine), served_from) + SETTLE_S
    end = min((max(r.finished for r in rs) if rs else start) for rs in by_project.values())
    steady = [r for rs in by_project.values() for r in rs]
    measured = shares(steady, start, end) if end > start else {}
    total_weight = sum(weights[p] for p in projects)
    rows = []
    for p in projects:
        expected = weights[p] / total_weight
        share = measured.get(p, 0.0) if measured else None
        rs = by_project[p]
        rows.append(
            {
                "project": p,
                "weight": weights[p],
                "lines": len(rs),
                "expected_share": round(expected, 4),
                "share": round(share, 4) if share is not None else None,
                "relative_error": round(share / expected - 1, 3) if share is not None else None,
                "first_line_s": round(min(r.started for r in rs) - first_created[p], 2) if rs else None,
                "last_line_s": round(max(r.finished for r in rs) - first_created[p], 2) if rs else None,
                "priorities": f"{min(r.priority for r in rs)}..{max(r.priority for r in rs)}" if rs else "-",
            }
        )
    first, last = min(r.started for r in log), max(r.finished for r in log)
    return {
        "projects": rows,
        "common_window_s": [round(start - first, 2), round(end - first, 2)],
        "busy_fraction": round(busy_fraction(log, slots, first, last), 3),
        "busy_fraction_common_window": round(busy_fraction(log, slots, start, end), 3) if end > start else None,
        "seconds": round(last - first, 1),
        "windows": windows(log, first, last),
    }
