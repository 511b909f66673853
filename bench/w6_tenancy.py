"""W6, tenancy: projects sharing two replicas (one Postgres, one blob directory) in front of the
fake upstream fleet (harness/tenancy.py), shares read from the fleet's own request log.

Scenarios (issue #25): ``three``: team-a queues 10 batches, then team-b 1 batch, then team-c a
small one, all weight 1; ``weighted``: the same with team-a at weight 2; ``deadline``: one
project's 24h batch, then a 1h batch of the same size. Reported: each project's share of the
fleet's lines per 5 s window, team-b's share while a and b both have work, team-c's
create-to-completed time, the fleet's busy fraction from the first line to the last, and the
1h and 24h batches' times.

    .venv/bin/python -m bench.w6_tenancy [--scale 1.0] [--scenarios three,weighted,deadline] [--out PREFIX]
"""

from __future__ import annotations

import argparse
import json
import tempfile
import time
from pathlib import Path

from bench.machine import machine_info
from harness import postgres
from harness.poll import wait_for_batch, wait_until
from harness.tenancy import TenancyCluster, busy_fraction, shares, span

URLS, PER_URL, DELAY_MS = 2, 8, 50  # 320 lines/s, as in the report
WINDOW_S = 5.0


def _started(cluster: TenancyCluster, prefix: str) -> None:
    wait_until(lambda: any(tag.startswith(prefix) for *_, tag in cluster.log()), timeout=120, what=prefix)


def _complete(cluster: TenancyCluster, project: str, batch_id: str):
    batch = wait_for_batch(cluster.client(project), batch_id, timeout=3600, interval=0.05)
    assert batch.status == "completed", batch
    return batch


def _windows(log, start: float, end: float) -> list[dict]:
    rows = []
    t = start
    while t < end:
        rows.append(
            {"from_s": round(t - start, 1), **{p: round(v, 3) for p, v in shares(log, t, t + WINDOW_S).items()}}
        )
        t += WINDOW_S
    return rows


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
    _started(cluster, "team-a/")
    b = cluster.create("team-b", b_file, replica=1).id
    _started(cluster, "team-b/")
    created = time.monotonic()
    c = cluster.create("team-c", c_file).id
    _complete(cluster, "team-c", c)
    c_seconds = time.monotonic() - created
    for batch_id in a:
        _complete(cluster, "team-a", batch_id)
    _complete(cluster, "team-b", b)
    if weight_a != 1:
        cluster.set_weight("team-a", 1)
    log = [entry for entry in cluster.log() if entry[0] >= since]
    first, last = min(s for s, _, _ in log), max(f for _, f, _ in log)
    b_start, b_end = span(log, "team-b/")
    a_end = span(log, "team-a/")[1]
    both_end = min(a_end, b_end)
    return {
        "lines": {"team-a": 10 * a_lines, "team-b": b_lines, "team-c": c_lines},
        "weights": {"team-a": weight_a, "team-b": 1, "team-c": 1},
        "small_batch_seconds": round(c_seconds, 2),
        "share_while_a_and_b_have_work": {k: round(v, 3) for k, v in shares(log, b_start, both_end).items()},
        "busy_fraction": round(busy_fraction(log, cluster.capacity_slots, first, last), 3),
        "busy_fraction_while_a_and_b": round(busy_fraction(log, cluster.capacity_slots, b_start, both_end), 3),
        "windows": _windows(log, first, last),
        "seconds": round(last - first, 1),
    }


def deadline(cluster: TenancyCluster, scale: float) -> dict:
    lines = int(2000 * scale)
    day_file = cluster.upload("team-d", "day", lines)
    hour_file = cluster.upload("team-d", "hour", lines)
    day_created = time.time()
    day = cluster.create("team-d", day_file, window="24h").id
    hour_created = time.time()
    hour = cluster.create("team-d", hour_file, window="1h", replica=1).id
    day_batch, hour_batch = _complete(cluster, "team-d", day), _complete(cluster, "team-d", hour)
    log = [e for e in cluster.log() if e[2].startswith("team-d/")]
    hour_took = span(log, "team-d/hour")[1] - hour_created
    day_took = span(log, "team-d/day")[1] - day_created
    first, last = min(s for s, _, _ in log), max(f for _, f, _ in log)
    return {
        "lines": lines,
        "hour_seconds": round(hour_took, 2),
        "day_seconds": round(day_took, 2),
        "ratio": round(hour_took / day_took, 3),
        "completed_at": {"24h": day_batch.completed_at, "1h": hour_batch.completed_at},
        "busy_fraction": round(busy_fraction(log, cluster.capacity_slots, first, last), 3),
        "windows": _windows(log, first, last),
    }


def report(results: dict, machine: dict, command: str) -> str:
    out = [
        "# W6: tenancy (fair share by project, deadlines)",
        "",
        f"Two replicas on one Postgres and one blob directory in front of the fake fleet: {URLS} URLs x "
        f"{PER_URL} slots x {DELAY_MS} ms = {URLS * PER_URL * 1000 // DELAY_MS} lines/s. Shares are of the lines "
        "the fleet answered (its request log), per project. "
        f"batchd commit `{machine['batchd_commit']}`, load average before {machine['load_average']}. "
        f"Command: `{command}`.",
        "",
    ]
    for name, r in results.items():
        if name == "deadline":
            out += [
                "## 1h batch queued behind a 24h batch (same project, same size)",
                "",
                f"{r['lines']} lines each: the 1h batch took {r['hour_seconds']} s, the 24h batch "
                f"{r['day_seconds']} s (ratio {r['ratio']}, goal <= 0.6); fleet busy {r['busy_fraction']}.",
                "",
            ]
            continue
        out += [
            f"## Three projects, weights {r['weights']['team-a']}:1:1",
            "",
            f"Lines: {r['lines']}. team-c's small batch: created to completed in {r['small_batch_seconds']} s "
            f"(goal <= 3 s). Shares while team-a and team-b both had work: {r['share_while_a_and_b_have_work']}. "
            f"Fleet busy fraction: {r['busy_fraction']} from the first line to the last, "
            f"{r['busy_fraction_while_a_and_b']} while a and b both had work (goal >= 0.95).",
            "",
            "| from (s) | team-a | team-b | team-c |",
            "|---|---|---|---|",
        ]
        out += [
            f"| {w['from_s']} | {w.get('team-a', 0):.2f} | {w.get('team-b', 0):.2f} | {w.get('team-c', 0):.2f} |"
            for w in r["windows"]
        ]
        out.append("")
    return "\n".join(out)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--scale", type=float, default=1.0, help="multiplies every batch's size")
    parser.add_argument("--scenarios", default="three,weighted,deadline")
    parser.add_argument("--out", type=Path, help="write PREFIX.json and PREFIX.md")
    args = parser.parse_args(argv)
    machine = machine_info()
    work = Path(tempfile.mkdtemp(prefix="batchd-w6-"))
    database = postgres.create_database()
    cluster = TenancyCluster(
        work,
        database,
        ["team-a", "team-b", "team-c", "team-d"],
        {"BATCHD_STORAGE_URL": str(work / "blobs")},
        urls=URLS,
        per_url=PER_URL,
        delay_ms=DELAY_MS,
        env={"BATCHD_SHARD_LINES": "100"},
    )
    results: dict = {}
    try:
        cluster.start()
        for name in args.scenarios.split(","):
            if name == "deadline":
                results[name] = deadline(cluster, args.scale)
            else:
                results[name] = three_projects(cluster, args.scale, 2 if name == "weighted" else 1)
            print(json.dumps({name: {k: v for k, v in results[name].items() if k != "windows"}}), flush=True)
    finally:
        cluster.stop()
        postgres.drop_database(database)
    command = "python -m bench.w6_tenancy " + " ".join(argv if argv is not None else [])
    text = report(results, machine, command.strip())
    print(text)
    if args.out:
        args.out.with_suffix(".json").write_text(json.dumps({"machine": machine, "results": results}, indent=2))
        args.out.with_suffix(".md").write_text(text)
    print(f"logs: {work}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
