"""W6 in the one harness: its scenarios, run in order on the clusters they share, and its report."""

from __future__ import annotations

import json
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import ClassVar

from bench.report import Report
from bench.workload import Context, parse_params
from bench.workloads.w6.fleet import PER_URL, SECOND_MODEL, SURPLUS_ENV, running_cluster
from bench.workloads.w6.inprocess import inprocess
from bench.workloads.w6.plan import TWENTY_PROJECTS
from bench.workloads.w6.report import render
from bench.workloads.w6.three import THREE_PROJECTS, deadline, three_projects
from bench.workloads.w6.twenty import twenty
from bench.workloads.w6.two_models import CLUSTER, LINES, PROJECTS, two_models
from harness.tenancy import MODEL

SCENARIOS = (
    "three",
    "weighted",
    "deadline",
    "three-one-replica",
    "twenty",
    "twenty-at-slots",
    "two-models",
    "inprocess",
)


def run(selected: list[str] | tuple[str, ...], scale: float, work: Path, log: Callable[[str], None] = print) -> dict:
    results: dict = {}

    def timed(name: str, scenario) -> None:
        began = time.monotonic()
        results[name] = scenario()
        results[name]["wall_seconds"] = round(time.monotonic() - began, 1)
        log(json.dumps({name: {k: v for k, v in results[name].items() if k in ("checks", "wall_seconds")}}))

    on_two = [name for name in ("three", "weighted", "deadline") if name in selected]
    if on_two:
        with running_cluster(work / "two-replicas", THREE_PROJECTS, replicas=2) as cluster:
            for name in on_two:
                if name == "deadline":
                    timed(name, lambda: deadline(cluster, scale))
                else:
                    timed(name, lambda name=name: three_projects(cluster, scale, 2 if name == "weighted" else 1))
    if "three-one-replica" in selected:
        with running_cluster(work / "one-replica", THREE_PROJECTS, replicas=1) as cluster:
            timed("three-one-replica", lambda: three_projects(cluster, scale, 1))
    # `twenty`: max_concurrency twice the fleet's slots per URL (docs/priority.md's recommendation for a
    # fleet that schedules by priority: the surplus queues at the fleet, where priority orders
    # it) and batchd's default window above that; `twenty-at-slots`: both at the fleet's slots.
    for scenario, env, per_url in (
        ("twenty", {}, 2 * PER_URL),
        ("twenty-at-slots", {SURPLUS_ENV: "0"}, PER_URL),
    ):
        if scenario in selected:
            options = {
                "replicas": 2,
                "models": (MODEL, SECOND_MODEL),
                "priority": True,
                "env": env,
                "upstream_max_concurrency": per_url,
            }
            with running_cluster(work / scenario, TWENTY_PROJECTS, **options) as cluster:

                def both(cluster=cluster) -> dict:
                    result = twenty(cluster, scale)
                    result["deadline"] = deadline(cluster, scale)
                    result["checks"] += result["deadline"]["checks"]
                    return result

                timed(scenario, both)
    if "two-models" in selected:  # issue #59: projects with work on two models, one replica
        with running_cluster(work / "two-models", PROJECTS, held=True, **CLUSTER) as cluster:
            timed("two-models", lambda: two_models(cluster, max(1, int(LINES * scale))))
    if "inprocess" in selected:
        timed("inprocess", lambda: inprocess(work / "inprocess", scale))
    return results


@dataclass(frozen=True)
class W6Params:
    scenarios: tuple[str, ...] = SCENARIOS


class W6Tenancy:
    id, slug, title = "W6", "W6-tenancy", "Tenancy (fair share by project, deadlines, twenty teams)"
    # One round by default; with --rounds N each goal is judged on the median of N rounds.
    default_rounds = 1
    Params: ClassVar[type[W6Params]] = W6Params

    def run(self, context: Context) -> Report:
        params = parse_params(W6Params, context.params)
        if unknown := set(params.scenarios) - set(SCENARIOS):
            raise ValueError(f"unknown scenario(s) {sorted(unknown)}; choose from {', '.join(SCENARIOS)}")
        began = time.monotonic()
        rounds = [
            run(params.scenarios, context.scale, context.work_dir / "W6" / f"round-{number}", context.log)
            for number in range(1, context.rounds + 1)
        ]
        data = {"seconds": round(time.monotonic() - began, 1), "rounds": rounds}
        # A batch that did not complete is a failed run; a missed goal is reported, not an error.
        failed = any(
            any(r.get("not_completed") for r in results.values())
            or any(row["status"] != "completed" for row in results.get("inprocess", {}).get("projects", []))
            for results in rounds
        )
        return Report(self.id, self.slug, self.title, data, render, failed=failed)
