"""The twenty teams' batches (issue #33): weights 1-4, mixed 1h/24h batches of 60-6,000 lines,
five teams also on the second model, small batches at the start and mid-run."""

from __future__ import annotations

from dataclasses import dataclass

from bench.workloads.w6.fleet import SECOND_MODEL
from harness.tenancy import MODEL


def team(i: int) -> str:
    return f"t{i:02d}"


def weight_of(i: int) -> int:
    return 1 + (i - 1) % 4


TEAMS = 20
LATE_TEAM = team(TEAMS + 1)  # a 21st team, weight 1, with only a small batch created mid-run
SMALL_AT_START = {1: 60, 2: 80, 7: 100, 8: 60, 13: 100}  # team -> lines of a 1h batch beside its 24h one
ON_SECOND_MODEL = (1, 6, 11, 16, 17)  # weights 1, 2, 3, 4, 1
TWENTY_PROJECTS = [team(i) for i in range(1, TEAMS + 2)] + ["team-d"]
LATE_AFTER = 0.25  # the late small batches come once this fraction of the first model's lines ran


@dataclass(frozen=True)
class Planned:
    project: str
    name: str
    model: str
    lines: int
    window: str
    late: bool = False  # created while the big batches run

    @property
    def tag(self) -> str:
        return f"{self.project}/{self.name}"

    @property
    def small(self) -> bool:
        """One of the small batches (<= SMALL_LINES, whatever the scale) timed to completion."""
        return self.name in ("small", "late")


def twenty_plan(scale: float) -> list[Planned]:
    """Each team's batch on the first model (400-2,400 lines by weight and position, about a
    minute's work at its weight share; a third of them 1h), team 20's 6,000-line one, small 1h batches beside five teams' 24h ones, five teams'
    batches on the second model, and two small batches created mid-run."""

    def size(n: int) -> int:
        return max(1, int(n * scale))

    plan = []
    for i in range(1, TEAMS + 1):
        w = weight_of(i)
        plan.append(Planned(team(i), "big", MODEL, size(400 * w + 200 * ((i - 1) // 4)), "1h" if i % 3 == 0 else "24h"))
        if i == TEAMS:
            plan.append(Planned(team(i), "huge", MODEL, size(6000), "24h"))
        if i in SMALL_AT_START:
            plan.append(Planned(team(i), "small", MODEL, SMALL_AT_START[i], "1h"))
        if i in ON_SECOND_MODEL:
            k = ON_SECOND_MODEL.index(i)
            plan.append(Planned(team(i), "second", SECOND_MODEL, size(700 * w + 100 * k), "1h" if k % 2 else "24h"))
    plan.append(Planned(LATE_TEAM, "late", MODEL, 60, "24h", late=True))
    plan.append(Planned(team(10), "late", MODEL, 100, "1h", late=True))
    return plan


def twenty_weights() -> dict[str, int]:
    """Every team's weight, the late 21st team's too."""
    return {team(i): weight_of(i) for i in range(1, TEAMS + 1)} | {LATE_TEAM: 1}
