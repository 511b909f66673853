"""W6, tenancy: projects sharing batchd replicas (one Postgres, one blob directory) in front of
fake upstream fleets that serve their waiting queues as vLLM's priority scheduler does (lowest
priority first, then arrival; harness/fake_upstream.py), shares read from the fleets' own
request logs; and a smaller check on an in-process engine, shares read from the batches'
request counts.

Every scenario runs on batchd's defaults (shard size, windows, leases). The twenty-team
scenarios configure their models with ``priority: true``, as a fleet started with vLLM's
``--scheduling-policy priority`` is configured, so batchd's priorities reach the fleet's queue.

Scenarios (issues #25, #33):

- ``three``, ``weighted``, ``deadline`` (two replicas): team-a queues 10 batches, then team-b 1
  batch, then team-c a small one (weights 1:1:1, or 2:1:1 for ``weighted``); one project's 1h
  batch created behind its 24h batch of the same size.
- ``three-one-replica``: ``three`` on one replica.
- ``twenty``: two replicas, two models (a fleet of 16 slots each), 20 projects with weights 1-4
  and mixed 1h/24h batches of 60-6,000 lines, five of them also on the second model; small
  batches at the start and while the big ones run (a 21st team's among them); then ``deadline``
  on the same cluster.
- ``twenty-at-slots``: ``twenty`` with batchd's upstream window at the fleet's slots
  (BATCHD_UPSTREAM_WINDOW_SURPLUS=0) instead of above them (the default).
- ``inprocess``: five projects with weights 1-4 sharing the built-in tiny chat model, in-process
  on one replica.

    .venv/bin/python -m bench --workloads W6 [--scale 1.0] [--rounds 3] [--param scenarios=three,twenty,...]
"""

from __future__ import annotations

import json
import statistics
import time
from collections.abc import Callable, Iterator
from concurrent.futures import Future, ThreadPoolExecutor
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import ClassVar

import openai

from bench.report import Document, Report
from bench.workload import Context, parse_params
from harness import postgres
from harness.client import openai_client
from harness.poll import TERMINAL, wait_for_batch, wait_until
from harness.server import ServerProcess
from harness.tenancy import (
    MODEL,
    Request,
    TenancyCluster,
    busy_fraction,
    key_of,
    project_of,
    set_weight,
    shares,
    span,
)

URLS, PER_URL, DELAY_MS = 2, 8, 50  # per model: 16 slots, 320 lines/s
WINDOW_S = 5.0
SECOND_MODEL = "fleet-model-2"
SURPLUS_ENV = "BATCHD_UPSTREAM_WINDOW_SURPLUS"  # batchd's upstream window over the fleet's slots
SMALL_LINES = 100  # a batch this small is done within SMALL_GOAL_S
SMALL_GOAL_S = 3.0
SHARE_TOLERANCE = 0.10  # relative, against the weight share
INPROCESS_TOLERANCE = 0.15
BUSY_GOAL = 0.95
RATIO_GOAL = 0.6
# Lines admitted before the last team's batch was created (up to batchd's window) go first:
# shares are measured from this long after the last creation.
SETTLE_S = 1.0
# Every team's first line reaches the fleet this soon after its batch is created (no team
# starved at the start; the share check runs from when all have lines at the fleet).
FIRST_LINE_GOAL_S = 3.0
SCENARIOS = ("three", "weighted", "deadline", "three-one-replica", "twenty", "twenty-at-slots", "inprocess")
THREE_PROJECTS = ["team-a", "team-b", "team-c", "team-d"]


def _check(what: str, value: object, goal: str, measure: float, rule: tuple, key: str | None = None) -> dict:
    """A goal: `value` as reported, `measure` the number `rule` judges ("max"/"min", bound;
    "range", low, high), so rounds can be judged on their median; `key` names the check across
    rounds (`what` may name the round's worst project)."""
    return {
        "check": what,
        "key": key or what,
        "value": value,
        "goal": goal,
        "measure": measure,
        "rule": list(rule),
        "pass": _passes(rule, measure),
    }


def _passes(rule: tuple | list, measure: float) -> bool:
    kind, *bounds = rule
    if kind == "max":
        return measure <= bounds[0]
    if kind == "min":
        return measure >= bounds[0]
    return bounds[0] <= measure <= bounds[1]


def _share_check(prefix: str, rows: list[dict], tolerance: float, window_s: list[float] | None) -> dict:
    """The project furthest from its weight share, over a common window of `window_s` seconds."""
    worst = max(rows, key=lambda row: 9.0 if row["relative_error"] is None else abs(row["relative_error"]))
    error = worst["relative_error"]
    seconds = round(window_s[1] - window_s[0], 1) if window_s else 0
    return _check(
        f"{prefix}worst share against weight share ({worst['project']})",
        f"{error:+.1%} over {seconds} s" if error is not None else "no common window",
        f"+-{tolerance:.0%}",
        abs(error) if error is not None else float("inf"),
        ("max", tolerance),
        key=f"{prefix}worst share against weight share",
    )


def _first_line_check(prefix: str, rows: list[dict]) -> dict:
    """The team whose first line reached the fleet latest after its batch was created."""
    latest = max(rows, key=lambda row: 9e9 if row["first_line_s"] is None else row["first_line_s"])
    seconds = latest["first_line_s"]
    return _check(
        f"{prefix}latest first line after creation ({latest['project']}), s",
        seconds if seconds is not None else "never",
        f"<= {FIRST_LINE_GOAL_S}",
        seconds if seconds is not None else float("inf"),
        ("max", FIRST_LINE_GOAL_S),
        key=f"{prefix}latest first line after creation, s",
    )


def _started(cluster: TenancyCluster, prefix: str) -> None:
    wait_until(lambda: any(r.tag.startswith(prefix) for r in cluster.log()), timeout=120, what=prefix)


def _complete(cluster: TenancyCluster, project: str, batch_id: str):
    batch = wait_for_batch(cluster.client(project), batch_id, timeout=3600, interval=0.05)
    assert batch.status == "completed", batch
    return batch


def _windows(log: list[Request], start: float, end: float) -> list[dict]:
    rows = []
    t = start
    while t < end:
        rows.append(
            {"from_s": round(t - start, 1), **{p: round(v, 3) for p, v in shares(log, t, t + WINDOW_S).items()}}
        )
        t += WINDOW_S
    return rows


# --- three projects (issue #25) ---------------------------------------------------------------


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
    log = [entry for entry in cluster.log() if entry.started >= since]
    first, last = min(r.started for r in log), max(r.finished for r in log)
    b_start, b_end = span(log, "team-b/")
    a_end = span(log, "team-a/")[1]
    both_end = min(a_end, b_end)
    share = {k: round(v, 3) for k, v in shares(log, b_start, both_end).items()}
    busy = round(busy_fraction(log, cluster.capacity_slots, first, last), 3)
    if weight_a == 1:
        share_check = _check(
            "team-b's share while a and b have work",
            share.get("team-b"),
            "0.40-0.60",
            share.get("team-b", 0),
            ("range", 0.40, 0.60),
        )
    else:
        expected = weight_a / (weight_a + 1)
        error = share.get("team-a", 0) / expected - 1
        share_check = _check(
            "team-a's share against its weight share",
            f"{share.get('team-a')} ({error:+.1%})",
            f"{expected:.3f} +-{SHARE_TOLERANCE:.0%}",
            abs(error),
            ("max", SHARE_TOLERANCE),
        )
    return {
        "replicas": len(cluster.servers),
        "lines": {"team-a": 10 * a_lines, "team-b": b_lines, "team-c": c_lines},
        "weights": {"team-a": weight_a, "team-b": 1, "team-c": 1},
        "small_batch_seconds": round(c_seconds, 2),
        "share_while_a_and_b_have_work": share,
        "busy_fraction": busy,
        "busy_fraction_while_a_and_b": round(busy_fraction(log, cluster.capacity_slots, b_start, both_end), 3),
        "windows": _windows(log, first, last),
        "seconds": round(last - first, 1),
        "checks": [
            share_check,
            _check(
                "team-c's small batch, created to completed (s)",
                round(c_seconds, 2),
                f"<= {SMALL_GOAL_S}",
                c_seconds,
                ("max", SMALL_GOAL_S),
            ),
            _check("fleet busy, first line to last", busy, f">= {BUSY_GOAL}", busy, ("min", BUSY_GOAL)),
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
    day_batch, hour_batch = _complete(cluster, project, day), _complete(cluster, project, hour)
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
        "windows": _windows(log, first, last),
        "checks": [_check("1h behind 24h, time ratio", ratio, f"<= {RATIO_GOAL}", ratio, ("max", RATIO_GOAL))],
    }


# --- twenty teams, two models ------------------------------------------------------------------


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


def _weights() -> dict[str, int]:
    return {team(i): weight_of(i) for i in range(1, TEAMS + 1)} | {LATE_TEAM: 1}


def _until_done(client: openai.OpenAI, batch_id: str, created: float) -> tuple[str, float]:
    """Poll a small batch closely; its final status and seconds from creation to it."""
    batch = wait_for_batch(client, batch_id, timeout=3600, interval=0.1)
    return batch.status, time.time() - created


def twenty(cluster: TenancyCluster, scale: float) -> dict:
    plan = twenty_plan(scale)
    weights = _weights()
    created: dict[Planned, float] = {}  # when the create call was sent
    exists: dict[Planned, float] = {}  # when it returned
    ids: dict[Planned, str] = {}
    small: dict[Planned, Future] = {}
    with ThreadPoolExecutor(8) as pool, ThreadPoolExecutor(len([b for b in plan if b.small])) as pollers:
        list(pool.map(lambda p: cluster.set_weight(p, weights[p]), [p for p, w in weights.items() if w != 1]))
        time.sleep(4)  # past the replicas' weight cache (3 s)
        files = dict(
            zip(plan, pool.map(lambda b: cluster.upload(b.project, b.name, b.lines, model=b.model), plan), strict=True)
        )
        since = time.time()
        base = cluster.fleet.stats().get("requests", 0)

        def create(b: Planned) -> None:
            replica = int(b.project.lstrip("t")) % 2
            created[b] = time.time()
            ids[b] = cluster.create(b.project, files[b], window=b.window, replica=replica).id
            exists[b] = time.time()
            if b.small:
                small[b] = pollers.submit(_until_done, cluster.client(b.project), ids[b], created[b])

        # All at once (a create takes a while on a busy host): the first teams' lines would
        # otherwise have the fleet to themselves until the last team's batch exists.
        list(pool.map(create, [b for b in plan if not b.late]))
        first_model_lines = sum(b.lines for b in plan if b.model == MODEL)
        wait_until(
            lambda: cluster.fleet.stats().get("requests", 0) - base >= LATE_AFTER * first_model_lines,
            timeout=3600,
            interval=0.2,
            what="a quarter of the first model's lines",
        )
        list(pool.map(create, [b for b in plan if b.late]))
        final = {b: wait_for_batch(cluster.client(b.project), ids[b], timeout=3600, interval=1.0) for b in plan}
        small_done = {b: future.result() for b, future in small.items()}
    logs = {model: [r for r in cluster.log(model) if r.started >= since] for model in (MODEL, SECOND_MODEL)}
    models = {
        model: _model_shares(logs[model], plan, model, created, exists, weights, cluster.capacity_slots)
        for model in logs
    }
    steady_weight = sum(weights[team(i)] for i in range(1, TEAMS + 1))
    smalls = []
    for b, (status, seconds) in small_done.items():
        # Its project's weight share of the fleet, with the twenty (and the 21st team) at work.
        total = steady_weight + (weights[b.project] if b.project == LATE_TEAM else 0)
        at_share = b.lines / (weights[b.project] / total * cluster.capacity)
        smalls.append(
            {
                "batch": b.tag,
                "lines": b.lines,
                "window": b.window,
                "created": "mid-run" if b.late else "at the start",
                "weight": weights[b.project],
                "status": status,
                "seconds": round(seconds, 2),
                "seconds_at_weight_share": round(at_share, 1),
            }
        )
    hours = [
        {"batch": b.tag, "model": b.model, "lines": b.lines, "status": final[b].status}
        for b in plan
        if b.window == "1h"
    ]
    failed = [b.tag for b in plan if final[b].status != "completed"]
    checks = []
    for model, m in models.items():
        checks.append(_share_check(f"{model}: ", m["projects"], SHARE_TOLERANCE, m["common_window_s"]))
        checks.append(_first_line_check(f"{model}: ", m["projects"]))
        checks.append(
            _check(
                f"{model}: fleet busy, first line to last",
                m["busy_fraction"],
                f">= {BUSY_GOAL}",
                m["busy_fraction"],
                ("min", BUSY_GOAL),
            )
        )
    slowest = max(smalls, key=lambda s: s["seconds"])
    checks.append(
        _check(
            f"slowest small batch ({slowest['batch']}), created to completed (s)",
            slowest["seconds"],
            f"<= {SMALL_GOAL_S}",
            slowest["seconds"] if all(s["status"] == "completed" for s in smalls) else float("inf"),
            ("max", SMALL_GOAL_S),
            key="slowest small batch, created to completed (s)",
        )
    )
    expired = [h["batch"] for h in hours if h["status"] != "completed"]
    checks.append(
        _check(
            "1h batches not completed (all feasible at creation)", expired or "none", "none", len(expired), ("max", 0)
        )
    )
    return {
        "replicas": len(cluster.servers),
        "fleet_per_model": f"{URLS} URLs x {PER_URL} slots x {DELAY_MS} ms = {cluster.capacity:.0f} lines/s",
        "window_surplus": cluster.servers[0].env.get(SURPLUS_ENV, "default"),
        "batches": [
            {
                "batch": b.tag,
                "model": b.model,
                "lines": b.lines,
                "window": b.window,
                "late": b.late,
                "status": final[b].status,
            }
            for b in plan
        ],
        "not_completed": failed,
        "models": models,
        "small_batches": smalls,
        "one_hour_batches": hours,
        "checks": checks,
    }


def _model_shares(
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
        "windows": _windows(log, first, last),
    }


# --- in-process engine ---------------------------------------------------------------------------

TINY_CHAT = "batchd-tiny-chat"
INPROCESS_WEIGHTS = {"e1": 1, "e2": 2, "e3": 3, "e4": 4, "e5": 1}


def _tiny_lines(tag: str, count: int) -> bytes:
    return b"".join(
        json.dumps(
            {
                "custom_id": f"{tag}-{i}",
                "method": "POST",
                "url": "/v1/chat/completions",
                "body": {"model": TINY_CHAT, "messages": [{"role": "user", "content": f"q{i}"}], "max_tokens": 8},
            }
        ).encode()
        + b"\n"
        for i in range(count)
    )


def inprocess(work: Path, scale: float) -> dict:
    """Five projects' batches on one replica's in-process tiny chat engine; each project's share
    of the lines completed (the batches' request counts, sampled every 0.5 s) while all have work."""
    work.mkdir(parents=True, exist_ok=True)
    database = postgres.create_database()
    keys = ",".join(f"{key_of(p)}={p}" for p in INPROCESS_WEIGHTS)
    # Eager (no torch.compile): a minute less start-up on a 2-CPU host; the engine's scheduling
    # is the same.
    config = work / "models.json"
    config.write_text(json.dumps({"models": {TINY_CHAT: {"engine_args": {"enforce_eager": True}}}}))
    server = ServerProcess(
        work / "replica",
        database,
        env={"BATCHD_API_KEYS": keys},
        models=True,
        args=["--model", TINY_CHAT, "--config", str(config)],
    )
    try:
        booted = time.monotonic()
        server.start(timeout=900)
        startup = time.monotonic() - booted
        for project, weight in INPROCESS_WEIGHTS.items():
            if weight != 1:
                set_weight(database, work, project, weight)
        time.sleep(4)  # past the replica's weight cache (3 s)
        clients = {p: openai_client(server.base_url, key_of(p), max_retries=2) for p in INPROCESS_WEIGHTS}
        # About 30 s of work: a batch's completed count moves once a checkpoint (about a second),
        # so shares need a common window of many checkpoints to resolve +-15 %.
        sizes = {p: max(1, int((1800 * w + 600 * k) * scale)) for k, (p, w) in enumerate(INPROCESS_WEIGHTS.items())}
        files = {
            p: clients[p].files.create(file=(f"{p}.jsonl", _tiny_lines(p, n)), purpose="batch").id
            for p, n in sizes.items()
        }
        batches = {
            p: clients[p].batches.create(input_file_id=f, endpoint="/v1/chat/completions", completion_window="24h").id
            for p, f in files.items()
        }
        all_created = time.time()
        samples: list[tuple[float, dict[str, tuple[int, str]]]] = []
        deadline_at = time.monotonic() + 3600
        while time.monotonic() < deadline_at:
            now = time.time()
            seen = {p: clients[p].batches.retrieve(b) for p, b in batches.items()}
            samples.append(
                (now, {p: (b.request_counts.completed if b.request_counts else 0, b.status) for p, b in seen.items()})
            )
            if all(b.status in TERMINAL for b in seen.values()):
                break
            time.sleep(0.5)
    finally:
        server.kill()
        postgres.drop_database(database)
    # While all have work: from the first sample where every batch has checkpointed lines (the
    # smallest validates first and runs alone meanwhile) to the last before any had all its lines
    # completed.
    busy = [(t, s) for t, s in samples if all(0 < c < sizes[p] and st not in TERMINAL for p, (c, st) in s.items())]
    window = [(t, s) for t, s in busy if t >= all_created + SETTLE_S]
    rows = []
    total_weight = sum(INPROCESS_WEIGHTS.values())
    done = {p: window[-1][1][p][0] - window[0][1][p][0] for p in INPROCESS_WEIGHTS} if len(window) >= 2 else {}
    for p, w in INPROCESS_WEIGHTS.items():
        expected = w / total_weight
        share = done[p] / (sum(done.values()) or 1) if done else None
        rows.append(
            {
                "project": p,
                "weight": w,
                "lines": sizes[p],
                "expected_share": round(expected, 4),
                "share": round(share, 4) if share is not None else None,
                "relative_error": round(share / expected - 1, 3) if share is not None else None,
                "status": samples[-1][1][p][1],
            }
        )
    first_progress = min((t for t, s in samples if any(c for c, _ in s.values())), default=all_created)
    window_s = (
        [round(window[0][0] - all_created, 1), round(window[-1][0] - all_created, 1)] if len(window) >= 2 else None
    )
    return {
        "replicas": 1,
        "model": TINY_CHAT,
        "startup_seconds": round(startup, 1),
        "projects": rows,
        "common_window_s": window_s,
        "seconds": round(samples[-1][0] - all_created, 1),
        "lines_per_second": round(sum(sizes.values()) / max(0.1, samples[-1][0] - first_progress), 1),
        "samples": [  # seconds after the last creation, then each project's completed count
            [round(t - all_created, 2), *(s[p][0] for p in INPROCESS_WEIGHTS)] for t, s in samples
        ],
        "checks": [_share_check("", rows, INPROCESS_TOLERANCE, window_s)],
    }


# --- running and reporting ---------------------------------------------------------------------


@contextmanager
def _cluster(work: Path, projects: list[str], **options) -> Iterator[TenancyCluster]:
    work.mkdir(parents=True, exist_ok=True)
    database = postgres.create_database()
    cluster = TenancyCluster(
        work,
        database,
        projects,
        {"BATCHD_STORAGE_URL": str(work / "blobs")},
        urls=URLS,
        per_url=PER_URL,
        delay_ms=DELAY_MS,
        **options,
    )
    try:
        yield cluster.start()
    finally:
        cluster.stop()
        postgres.drop_database(database)


def run(selected: list[str] | tuple[str, ...], scale: float, work: Path, log: Callable[[str], None] = print) -> dict:
    results: dict = {}

    def timed(name: str, scenario) -> None:
        began = time.monotonic()
        results[name] = scenario()
        results[name]["wall_seconds"] = round(time.monotonic() - began, 1)
        log(json.dumps({name: {k: v for k, v in results[name].items() if k in ("checks", "wall_seconds")}}))

    on_two = [name for name in ("three", "weighted", "deadline") if name in selected]
    if on_two:
        with _cluster(work / "two-replicas", THREE_PROJECTS, replicas=2) as cluster:
            for name in on_two:
                if name == "deadline":
                    timed(name, lambda: deadline(cluster, scale))
                else:
                    timed(name, lambda name=name: three_projects(cluster, scale, 2 if name == "weighted" else 1))
    if "three-one-replica" in selected:
        with _cluster(work / "one-replica", THREE_PROJECTS, replicas=1) as cluster:
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
            with _cluster(work / scenario, TWENTY_PROJECTS, **options) as cluster:

                def both(cluster=cluster) -> dict:
                    result = twenty(cluster, scale)
                    result["deadline"] = deadline(cluster, scale)
                    result["checks"] += result["deadline"]["checks"]
                    return result

                timed(scenario, both)
    if "inprocess" in selected:
        timed("inprocess", lambda: inprocess(work / "inprocess", scale))
    return results


def _checks_table(checks: list[dict]) -> list[str]:
    out = ["| check | value | goal | result |", "|---|---|---|---|"]
    out += [f"| {c['check']} | {c['value']} | {c['goal']} | {'pass' if c['pass'] else '**FAIL**'} |" for c in checks]
    return out + [""]


def _three_section(name: str, r: dict) -> list[str]:
    out = [
        f"## `{name}`: three projects, weights {r['weights']['team-a']}:1:1, {r['replicas']} replica(s)",
        "",
        f"Lines: {r['lines']}. Shares while team-a and team-b both had work: "
        f"{r['share_while_a_and_b_have_work']}. Fleet busy {r['busy_fraction']} from the first line to the "
        f"last, {r['busy_fraction_while_a_and_b']} while a and b both had work. {r['wall_seconds']} s.",
        "",
        *_checks_table(r["checks"]),
        "| from (s) | team-a | team-b | team-c |",
        "|---|---|---|---|",
    ]
    out += [
        f"| {w['from_s']} | {w.get('team-a', 0):.2f} | {w.get('team-b', 0):.2f} | {w.get('team-c', 0):.2f} |"
        for w in r["windows"]
    ]
    return out + [""]


def _deadline_lines(r: dict) -> list[str]:
    return [
        f"1h batch created behind a 24h batch of the same project ({r['lines']} lines each, "
        f"{r['replicas']} replicas): the 1h batch took {r['hour_seconds']} s, the 24h batch {r['day_seconds']} s "
        f"(ratio {r['ratio']}, goal <= {RATIO_GOAL}); fleet busy {r['busy_fraction']}.",
        "",
    ]


def _twenty_section(name: str, r: dict) -> list[str]:
    out = [
        f"## `{name}`: twenty teams, two models, {r['replicas']} replicas, upstream window surplus "
        f"{r['window_surplus']}",
        "",
        f"Each model: a fleet of {r['fleet_per_model']}, `priority: true`. {r['wall_seconds']} s in all.",
        "",
        *_checks_table(r["checks"]),
    ]
    for model, m in r["models"].items():
        window = m["common_window_s"]
        out += [
            f"### {model}: shares while all its teams had work ({window[0]}-{window[1]} s after its first line)",
            "",
            f"Fleet busy {m['busy_fraction']} from the first line to the last ({m['seconds']} s), "
            f"{m['busy_fraction_common_window']} in the common window. First/last line: seconds after the "
            "team's first batch on the model was created.",
            "",
            "| project | weight | lines | weight share | share | error | first line (s) | last line (s) | priorities |",
            "|---|---|---|---|---|---|---|---|---|",
        ]
        for row in m["projects"]:
            error = f"{row['relative_error']:+.1%}" if row["relative_error"] is not None else "-"
            flag = (
                "" if row["relative_error"] is not None and abs(row["relative_error"]) <= SHARE_TOLERANCE else " **!**"
            )
            out.append(
                f"| {row['project']} | {row['weight']} | {row['lines']} | {row['expected_share']:.3f} | "
                f"{row['share'] if row['share'] is not None else '-'} | {error}{flag} | {row['first_line_s']} | "
                f"{row['last_line_s']} | {row['priorities']} |"
            )
        out.append("")
    out += [
        "### Small batches (<= 100 lines), created to completed",
        "",
        "At weight share: the time the batch needs at its team's weight share of the fleet while the "
        "twenty teams have work (a goal under 3 s needs more than that share).",
        "",
        "| batch | lines | window | created | weight | status | seconds | at weight share (s) |",
        "|---|---|---|---|---|---|---|---|",
    ]
    out += [
        f"| {s['batch']} | {s['lines']} | {s['window']} | {s['created']} | {s['weight']} | {s['status']} | "
        f"{s['seconds']} | {s['seconds_at_weight_share']} |"
        for s in r["small_batches"]
    ]
    out += ["", *_deadline_lines(r["deadline"])]
    return out


def _inprocess_section(r: dict) -> list[str]:
    window = r["common_window_s"]
    out = [
        f"## `inprocess`: five projects on the in-process `{r['model']}`, one replica",
        "",
        f"Engine start-up {r['startup_seconds']} s; {r['lines_per_second']} lines/s; {r['seconds']} s from the "
        f"last creation to the last batch's end. Shares are of the lines completed (the batches' "
        f"request counts) {window[0] if window else '-'}-{window[1] if window else '-'} s after the last "
        f"creation, while every batch had lines completed and lines left. {r['wall_seconds']} s in all.",
        "",
        *_checks_table(r["checks"]),
        "| project | weight | lines | weight share | share | error | status |",
        "|---|---|---|---|---|---|---|",
    ]
    for row in r["projects"]:
        error = f"{row['relative_error']:+.1%}" if row["relative_error"] is not None else "-"
        out.append(
            f"| {row['project']} | {row['weight']} | {row['lines']} | {row['expected_share']:.3f} | "
            f"{row['share'] if row['share'] is not None else '-'} | {error} | {row['status']} |"
        )
    return out + [""]


def render(doc: Document) -> str:
    """The report's body from its JSON document (the writer adds the title, commit, machine and
    command): with several rounds, each goal judged on the median of its rounds, then each round."""
    rounds = doc.get("rounds") or [doc["results"]]
    out = [
        "Replicas on one Postgres and one blob directory in front of fake fleets, one per model "
        f"({URLS} URLs x {PER_URL} slots x {DELAY_MS} ms = {URLS * PER_URL * 1000 // DELAY_MS} lines/s each), "
        "whose waiting queues are served lowest priority first, then in arrival order (vLLM's "
        "priority scheduler). Shares are of the lines a fleet served (its request log), per project. "
        "Every scenario runs on batchd's defaults; the twenty-team ones say `priority: true` for their "
        f"models. {doc['seconds']:.0f} s in all.",
        "",
    ]
    if len(rounds) == 1:
        return "\n".join(out + _round_lines(rounds[0]))
    out += _median_lines(rounds)
    for number, results in enumerate(rounds, 1):
        out += [f"# Round {number}", "", *_round_lines(results)]
    return "\n".join(out)


def _median_lines(rounds: list[dict]) -> list[str]:
    """Each goal judged on the median of its rounds' measures (a share's is its absolute error)."""
    out = [
        f"## Goals: the median of {len(rounds)} rounds",
        "",
        "| scenario | check | "
        + " | ".join(f"round {i}" for i in range(1, len(rounds) + 1))
        + " | median | goal | result |",
        "|---|---|" + "---|" * len(rounds) + "---|---|---|",
    ]
    for name, first in rounds[0].items():
        for check in first["checks"]:
            same = [next(c for c in r[name]["checks"] if c["key"] == check["key"]) for r in rounds]
            middle = statistics.median(c["measure"] for c in same)
            shown = f"{middle:.1%}" if "+-" in check["goal"] else f"{round(middle, 3):g}"
            values = " | ".join(str(c["value"]) for c in same)
            result = "pass" if _passes(check["rule"], middle) else "**FAIL**"
            out.append(f"| {name} | {check['key']} | {values} | {shown} | {check['goal']} | {result} |")
    return out + [""]


def _round_lines(results: dict) -> list[str]:
    out = ["## Goals", "", "| scenario | check | value | goal | result |", "|---|---|---|---|---|"]
    for name, r in results.items():
        out += [
            f"| {name} | {c['check']} | {c['value']} | {c['goal']} | {'pass' if c['pass'] else '**FAIL**'} |"
            for c in r["checks"]
        ]
    out.append("")
    for name, r in results.items():
        if name == "deadline":
            out += ["## `deadline`", "", *_deadline_lines(r)]
        elif name.startswith("twenty"):
            out += _twenty_section(name, r)
        elif name == "inprocess":
            out += _inprocess_section(r)
        else:
            out += _three_section(name, r)
    return out


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
