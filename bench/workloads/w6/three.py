"""Three projects (issue #25): team-a's ten batches, team-b's one, team-c's small one; and a 1h
batch created behind its project's 24h batch (``deadline``)."""

from __future__ import annotations

import time

from bench.report import Check
from bench.workloads.w6.checks import BUSY_GOAL, RATIO_GOAL, SHARE_TOLERANCE, SMALL_GOAL_S
from bench.workloads.w6.fleet import complete, started
from bench.workloads.w6.measure import windows
from harness.tenancy import TenancyCluster, busy_fraction, shares, span

THREE_PROJECTS = ["team-a", "team-b", "team-c", "team-d"]


def three_projects(cluster: TenancyCluster, scale: float, weight_a: int) -> dict:
    a_lines, b_lines, c_lines = int(600 * scale), int(1500 * scale), max(1, int(60 * scale))
    since = time.time()  # the fleet's log holds the scenarios before this one too
    if weight_a != 1:
        cluster.set_weight("team-a", weight_a)
        time.sleep(4)  # past the replicas' weight cache (3 s)
    a_files = [cluster.upload("team-a", f"a{n}", a_lines) for n in range(10)]
    b_file = cluster.upload("team-b", "b0", b_lines, replica=1)
    c_file = cluster.upload("team-c", "c0", c_lines)
    a = [cluster.create("team-a", f, replica=n % 2).id for n, f in enumerate(a_files)]
    started(cluster, "team-a/")
    b = cluster.create("team-b", b_file, replica=1).id
    started(cluster, "team-b/")
    created = time.monotonic()
    c = cluster.create("team-c", c_file).id
    complete(cluster, "team-c", c)
    c_seconds = time.monotonic() - created
    for batch_id in a:
        complete(cluster, "team-a", batch_id)
    complete(cluster, "team-b", b)
    if weight_a != 1:
        cluster.set_weight("team-a", 1)
    log = [entry for entry in cluster.log() if entry.started >= since]
    first, last = min(r.started for r in log), max(r.finished for r in log)
    b_start, b_end = span(log, "team-b/")
    a_end = span(log, "team-a/")[1]
    both_end = min(a_end, b_end)
    share = {k: round(v, 3) for k, v in shares(log, b_start, both_end).items()}
    busy = round(busy_fraction(log, cluster.capacity_slots, first, last), 3)
    if weight_a == 1:
        share_check = Check.within(
            "team-b's share while a and b have work",
            share.get("team-b", 0),
            0.40,
            0.60,
            goal="0.40-0.60",
            value=share.get("team-b"),
        )
    else:
        expected = weight_a / (weight_a + 1)
        error = share.get("team-a", 0) / expected - 1
        share_check = Check.at_most(
            "team-a's share against its weight share",
            abs(error),
            SHARE_TOLERANCE,
            goal=f"{expected:.3f} +-{SHARE_TOLERANCE:.0%}",
            value=f"{share.get('team-a')} ({error:+.1%})",
        )
    return {
        "replicas": len(cluster.servers),
        "lines": {"team-a": 10 * a_lines, "team-b": b_lines, "team-c": c_lines},
        "weights": {"team-a": weight_a, "team-b": 1, "team-c": 1},
        "small_batch_seconds": round(c_seconds, 2),
        "share_while_a_and_b_have_work": share,
        "busy_fraction": busy,
        "busy_fraction_while_a_and_b": round(busy_fraction(log, cluster.capacity_slots, b_start, both_end), 3),
        "windows": windows(log, first, last),
        "seconds": round(last - first, 1),
        "checks": [
            share_check.to_dict(),
            Check.at_most(
                "team-c's small batch, created to completed (s)", c_seconds, SMALL_GOAL_S, value=round(c_seconds, 2)
            ).to_dict(),
            Check.at_least("fleet busy, first line to last", busy, BUSY_GOAL).to_dict(),
        ],
    }


def deadline(cluster: TenancyCluster, scale: float, project: str = "team-d") -> dict:
    lines = int(2000 * scale)
    since = time.time()
    day_file = cluster.upload(project, "day", lines)
    hour_file = cluster.upload(project, "hour", lines)
    day_created = time.time()
    day = cluster.create(project, day_file, window="24h").id
    hour_created = time.time()
    hour = cluster.create(project, hour_file, window="1h", replica=1).id
    day_batch, hour_batch = complete(cluster, project, day), complete(cluster, project, hour)
    log = [e for e in cluster.log() if e.tag.startswith(f"{project}/") and e.started >= since]
    hour_took = span(log, f"{project}/hour")[1] - hour_created
    day_took = span(log, f"{project}/day")[1] - day_created
    first, last = min(r.started for r in log), max(r.finished for r in log)
    ratio = round(hour_took / day_took, 3)
    return {
        "replicas": len(cluster.servers),
        "lines": lines,
        "hour_seconds": round(hour_took, 2),
        "day_seconds": round(day_took, 2),
        "ratio": ratio,
        "completed_at": {"24h": day_batch.completed_at, "1h": hour_batch.completed_at},
        "busy_fraction": round(busy_fraction(log, cluster.capacity_slots, first, last), 3),
        "windows": windows(log, first, last),
        "checks": [Check.at_most("1h behind 24h, time ratio", ratio, RATIO_GOAL).to_dict()],
    }
