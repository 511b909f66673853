"""Twenty teams on two models (issue #33), on one cluster: the plan's batches created at once,
the late ones once a quarter of the first model's lines ran."""

from __future__ import annotations

import time
from concurrent.futures import Future, ThreadPoolExecutor

import openai

from bench.report import Check
from bench.workloads.w6.checks import BUSY_GOAL, SHARE_TOLERANCE, SMALL_GOAL_S, first_line_check, share_check
from bench.workloads.w6.fleet import DELAY_MS, PER_URL, SECOND_MODEL, SURPLUS_ENV, URLS
from bench.workloads.w6.measure import model_shares
from bench.workloads.w6.plan import LATE_AFTER, LATE_TEAM, TEAMS, Planned, team, twenty_plan, twenty_weights
from harness.poll import wait_for_batch, wait_until
from harness.tenancy import MODEL, TenancyCluster


def until_done(client: openai.OpenAI, batch_id: str, created: float) -> tuple[str, float]:
    """Poll a small batch closely; its final status and seconds from creation to it."""
    batch = wait_for_batch(client, batch_id, timeout=3600, interval=0.1)
    return batch.status, time.time() - created


def twenty(cluster: TenancyCluster, scale: float) -> dict:
    plan = twenty_plan(scale)
    weights = twenty_weights()
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
                small[b] = pollers.submit(until_done, cluster.client(b.project), ids[b], created[b])

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
        model: model_shares(logs[model], plan, model, created, exists, weights, cluster.capacity_slots)
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
        checks.append(share_check(f"{model}: ", m["projects"], SHARE_TOLERANCE, m["common_window_s"]))
        checks.append(first_line_check(f"{model}: ", m["projects"]))
        checks.append(
            Check.at_least(f"{model}: fleet busy, first line to last", m["busy_fraction"], BUSY_GOAL).to_dict()
        )
    slowest = max(smalls, key=lambda s: s["seconds"])
    checks.append(
        Check.at_most(
            f"slowest small batch ({slowest['batch']}), created to completed (s)",
            slowest["seconds"] if all(s["status"] == "completed" for s in smalls) else float("inf"),
            SMALL_GOAL_S,
            value=slowest["seconds"],
            key="slowest small batch, created to completed (s)",
        ).to_dict()
    )
    expired = [h["batch"] for h in hours if h["status"] != "completed"]
    checks.append(
        Check.at_most(
            "1h batches not completed (all feasible at creation)", len(expired), 0, goal="none", value=expired or "none"
        ).to_dict()
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
