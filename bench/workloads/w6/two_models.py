"""Projects with work on two models (issue #59), on one replica: twenty projects (p00-p09 weight
1, p10-p19 weight 2) each create a 400-line 24h batch on the first model, one after another;
then p00-p04 each create a 400-line 24h batch on the second, in that order (a create every
STAGGER_S). Goal: every
project within +-10 % of its weight share on each model while all its projects have work.

On a cluster started `held` (the e2e test's and the bench's), the fleets answer nothing until every batch is
validated, so the window with all projects at work is the whole run, not a hope that the last
project starts before the first one is done.

Used by bench W6 (``--param scenarios=two-models``) and by tests/e2e/test_two_models.py."""

from __future__ import annotations

import time
from concurrent.futures import ThreadPoolExecutor

import openai

from bench.workloads.w6.checks import SHARE_TOLERANCE, share_check
from bench.workloads.w6.fleet import DELAY_MS, PER_URL, SECOND_MODEL, URLS
from bench.workloads.w6.measure import model_shares
from bench.workloads.w6.plan import Planned
from harness.poll import wait_for_batch, wait_until
from harness.tenancy import MODEL, TenancyCluster

PROJECTS = [f"p{i:02d}" for i in range(20)]
WEIGHTS = {p: 1 if i < 10 else 2 for i, p in enumerate(PROJECTS)}
ON_SECOND = PROJECTS[:5]
LINES = 400
# Each create is sent this long after the one before, in creation order, without waiting for it
# to return: on a busy host a create takes 0.4 s, and twenty made one after another gave the first
# projects' 400 lines time to finish before the last project's batch existed (no window with
# every project at work to measure).
STAGGER_S = 0.05
# The cluster: one replica, both models' fleets scheduling by priority, batchd's window above
# their slots (max_concurrency twice the slots per URL, as in `twenty`).
CLUSTER = {
    "replicas": 1,
    "models": (MODEL, SECOND_MODEL),
    "priority": True,
    "upstream_max_concurrency": 2 * PER_URL,
}


def two_models_plan(lines: int = LINES) -> list[Planned]:
    """The batches in the order they are created."""
    first = [Planned(p, "first", MODEL, lines, "24h") for p in PROJECTS]
    return first + [Planned(p, "second", SECOND_MODEL, lines, "24h") for p in ON_SECOND]


def two_models(cluster: TenancyCluster, lines: int = LINES) -> dict:
    """Run the plan on `cluster` (started with CLUSTER's options for PROJECTS); each model's
    shares from its fleet's log, the checks, and when each batch was created."""
    plan = two_models_plan(lines)
    cluster.set_weights({p: w for p, w in WEIGHTS.items() if w != 1})
    weights_set = time.time()
    with ThreadPoolExecutor(8) as pool:
        uploads = pool.map(lambda b: cluster.upload(b.project, b.name, b.lines, model=b.model), plan)
        files = dict(zip(plan, uploads, strict=True))
    time.sleep(max(0.0, weights_set + 4 - time.time()))  # past the replicas' weight cache (3 s)
    since = time.time()
    created: dict[Planned, float] = {}
    exists: dict[Planned, float] = {}
    ids: dict[Planned, str] = {}

    def create(b: Planned) -> None:
        created[b] = time.time()
        ids[b] = cluster.create(b.project, files[b]).id
        exists[b] = time.time()

    with ThreadPoolExecutor(len(plan)) as pool:
        futures = []
        for b in plan:  # in the order
            futures.append(pool.submit(create, b))
            time.sleep(STAGGER_S)
        for future in futures:
            future.result()
    clients = {p: cluster.client(p) for p in PROJECTS}  # one each: a client costs a connection
    released = _release_once_validated(cluster, clients, ids) if cluster.held else None
    final = {b: wait_for_batch(clients[b.project], ids[b], timeout=600, interval=0.5) for b in plan}
    models = {}
    for model in (MODEL, SECOND_MODEL):
        log = [r for r in cluster.log(model) if r.started >= since]
        models[model] = model_shares(log, plan, model, created, exists, WEIGHTS, cluster.capacity_slots)
    checks = [
        share_check(f"{model}: ", m["projects"], SHARE_TOLERANCE, m["common_window_s"]) for model, m in models.items()
    ]
    return {
        "replicas": len(cluster.servers),
        "fleet_per_model": f"{URLS} URLs x {PER_URL} slots x {DELAY_MS} ms = {cluster.capacity:.0f} lines/s",
        "created_s": {b.tag: round(created[b] - since, 2) for b in plan},
        "not_completed": [b.tag for b in plan if final[b].status != "completed"],
        "models": models,
        "checks": checks,
    } | ({"released_s": round(released - since, 2)} if released is not None else {})


# Lines held at a fleet past batchd's upstream timeout_s (60) would be retried: validating 25
# batches takes seconds even on a loaded host.
HOLD_LIMIT_S = 45


def _release_once_validated(
    cluster: TenancyCluster, clients: dict[str, openai.OpenAI], ids: dict[Planned, str]
) -> float:
    """A held cluster's fleets start serving once every batch is validated (its lines waiting in
    batchd or at the fleet): all the projects then have work from the first line on, whatever
    order their batches were created in. Returns when."""

    validating = dict(ids)

    def validated() -> bool:
        for b, batch_id in list(validating.items()):
            if clients[b.project].batches.retrieve(batch_id).status != "validating":
                del validating[b]
        return not validating

    wait_until(
        validated,
        timeout=HOLD_LIMIT_S,
        what=lambda: f"every batch validated, not {sorted(b.tag for b in validating)}",
        interval=0.2,
    )
    cluster.release()
    return time.time()
