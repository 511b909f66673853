"""W5, scale by simulation: batchd in front of a simulated upstream fleet whose capacity is
known, to show the front-end keeps such a fleet busy and what it costs per line.

Each simulated URL answers a request after 200 ms, at most 32 at once (the rest queue, as in
vLLM's scheduler): 160 lines/s per URL. Scenario ``one``: one replica (SQLite) in front of 4
URLs (640 lines/s). Scenario ``two``: two replicas on one Postgres and one blob directory in
front of 8 URLs (1,280 lines/s). The whole fleet is one asyncio (uvloop) process, so it costs
little of the CPU being measured; its own CPU is reported too.

Timings are wall clock to the millisecond: the run as the fleet saw it (its first request to
its last answer) and end to end (`batches.create` to `completed`, polled every 0.25 s and every
20 ms once 90 % of the lines are done).

    .venv/bin/python -m bench --workloads W5 [--scale 1.0] [--param scenarios=one,two]
"""

from __future__ import annotations

import json
import os
import threading
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, ClassVar

from bench.measure import cpu_seconds
from bench.report import Check, Document, Report, checks_table
from bench.workload import Context, parse_params
from harness import postgres
from harness.client import openai_client
from harness.fake_fleet import FakeFleet, upstream_config
from harness.poll import wait_for_batch
from harness.server import ServerProcess

MODEL = "sim"
DELAY_MS = 200
PER_URL = 32
KEY = "bench-key"
# Far beyond a run at the fleet's capacity; a bound so that a stuck batch ends the run.
BATCH_TIMEOUT_S = 3600
LINES = 20_000
CAPACITY_GOAL = 0.95  # lines/s while running, over the fleet's capacity


@dataclass
class Scenario:
    name: str
    urls: int
    replicas: int
    postgres: bool

    @property
    def capacity(self) -> float:
        return self.urls * PER_URL * 1000 / DELAY_MS


SCENARIOS = {"one": Scenario("one", 4, 1, False), "two": Scenario("two", 8, 2, True)}


@dataclass
class Result:
    scenario: Scenario
    lines: int
    run_s: float = 0.0  # the fleet's first request -> its last answer: the lines' own time
    total_s: float = 0.0  # create -> completed: validation and finalize included
    replica_cpu_s: list[float] = field(default_factory=list)
    fleet_cpu_s: float = 0.0
    fleet_requests: int = 0
    loadavg_before: tuple[float, ...] = ()
    loadavg_after: tuple[float, ...] = ()
    status: str = ""

    @property
    def run_rate(self) -> float:
        return self.lines / self.run_s if self.run_s else 0.0

    @property
    def total_rate(self) -> float:
        return self.lines / self.total_s if self.total_s else 0.0

    @property
    def cpu_ms_per_line(self) -> float:
        return 1000 * sum(self.replica_cpu_s) / self.lines

    def to_dict(self) -> dict[str, Any]:
        return {
            "scenario": self.scenario.name,
            "replicas": self.scenario.replicas,
            "urls": self.scenario.urls,
            "database": "postgres" if self.scenario.postgres else "sqlite",
            "capacity_lines_per_s": self.scenario.capacity,
            "lines": self.lines,
            "status": self.status,
            "run_s": round(self.run_s, 3),
            "total_s": round(self.total_s, 3),
            "run_lines_per_s": round(self.run_rate, 1),
            "run_x_capacity": round(self.run_rate / self.scenario.capacity, 3),
            "total_lines_per_s": round(self.total_rate, 1),
            "total_x_capacity": round(self.total_rate / self.scenario.capacity, 3),
            "replica_cpu_s": [round(c, 3) for c in self.replica_cpu_s],
            "cpu_ms_per_line": round(self.cpu_ms_per_line, 4),
            "fleet_cpu_s": round(self.fleet_cpu_s, 3),
            "fleet_requests": self.fleet_requests,
            "loadavg_before": list(self.loadavg_before),
            "loadavg_after": list(self.loadavg_after),
        }


def _input(lines: int) -> bytes:
    return b"".join(
        json.dumps(
            {
                "custom_id": f"r-{i}",
                "method": "POST",
                "url": "/v1/chat/completions",
                "body": {"model": MODEL, "messages": [{"role": "user", "content": f"hello {i}"}], "max_tokens": 16},
            }
        ).encode()
        + b"\n"
        for i in range(lines)
    )


def run(scenario: Scenario, lines: int, work: Path) -> Result:
    result = Result(scenario, lines)
    fleet = FakeFleet(work, count=scenario.urls, delay_ms=DELAY_MS, max_concurrency=PER_URL).start()
    config = upstream_config(
        work / f"{scenario.name}.json",
        {
            MODEL: {
                "urls": fleet.urls,
                "model": fleet.model,
                "max_concurrency": PER_URL,
                "timeout_s": 60,
                "health_interval_s": 5,
            }
        },
    )
    database = postgres.create_database() if scenario.postgres else None
    env = {
        "BATCHD_API_KEYS": KEY,
        "BATCHD_STORAGE_URL": str(work / f"{scenario.name}-blobs"),
        "BATCHD_MAX_BATCH_LINES": str(max(lines, 50_000)),
    }
    servers = [
        ServerProcess(
            work / f"{scenario.name}-r{i}",
            database,
            env={**env, "BATCHD_REPLICA_ID": f"replica-{i}"},
            models=True,
            args=["--config", str(config)],
        )
        for i in range(scenario.replicas)
    ]
    try:
        for server in servers:
            server.data_dir.mkdir(parents=True, exist_ok=True)
        threads = [threading.Thread(target=s.start) for s in servers]
        for t in threads:
            t.start()
        for t in threads:
            t.join()
        client = openai_client(servers[0].base_url, KEY, max_retries=2)
        file = client.files.create(file=("w5.jsonl", _input(lines)), purpose="batch")
        result.loadavg_before = os.getloadavg()
        cpu_before = [cpu_seconds(s.pid, tree=True) for s in servers]
        created = time.monotonic()
        batch = client.batches.create(input_file_id=file.id, endpoint="/v1/chat/completions", completion_window="24h")
        wait_for_batch(
            client,
            batch.id,
            timeout=BATCH_TIMEOUT_S,
            interval=0.25,
            until=lambda b: (
                b.status != "in_progress" or b.request_counts.completed + b.request_counts.failed >= 0.9 * lines
            ),
        )
        batch = wait_for_batch(client, batch.id, timeout=BATCH_TIMEOUT_S, interval=0.02)
        result.total_s = time.monotonic() - created
        result.replica_cpu_s = [
            cpu_seconds(s.pid, tree=True) - before for s, before in zip(servers, cpu_before, strict=True)
        ]
        result.loadavg_after = os.getloadavg()
        result.status = f"{batch.status} ({batch.request_counts.completed} ok, {batch.request_counts.failed} failed)"
        stats = fleet.stats()
        result.run_s = stats["last_at"] - stats["first_at"] if stats.get("first_at") and stats.get("last_at") else 0.0
    finally:
        for server in servers:
            server.stop()
        stats = fleet.stop()
        result.fleet_cpu_s, result.fleet_requests = stats.get("cpu_s", 0.0), stats.get("requests", 0)
        if database:
            postgres.drop_database(database)
    return result


def render(doc: Document) -> str:
    out = [
        f"Simulated fleet: each request takes {DELAY_MS} ms, at most {PER_URL} at once per URL "
        f"({PER_URL * 1000 // DELAY_MS} lines/s per URL), one uvloop process for every URL. "
        "Lines: chat requests of a few tokens. Rates while running (the fleet's first request to its "
        "last answer, ms) and end to end (create to `completed`, polled every 0.25 s, every 20 ms "
        "once 90 % of the lines are done).",
        "",
        "| scenario | fleet capacity | lines | status | run lines/s | x capacity | end-to-end lines/s "
        "| x capacity | front-end CPU ms/line | fleet CPU ms/line | load avg (1 min) before / after |",
        "|---|---|---|---|---|---|---|---|---|---|---|",
    ]
    for r in doc["runs"]:
        out.append(
            f"| {r['scenario']}: {r['replicas']} replica(s), {r['urls']} URLs, "
            f"{'Postgres' if r['database'] == 'postgres' else 'SQLite'} "
            f"| {r['capacity_lines_per_s']:.0f}/s | {r['lines']} | {r['status']} | {r['run_lines_per_s']:.1f} "
            f"| {r['run_x_capacity']:.3f} | {r['total_lines_per_s']:.1f} | {r['total_x_capacity']:.3f} "
            f"| {r['cpu_ms_per_line']:.3f} ({' + '.join(f'{c:.1f}' for c in r['replica_cpu_s'])} s) "
            f"| {1000 * r['fleet_cpu_s'] / max(1, r['fleet_requests']):.2f} "
            f"| {r['loadavg_before'][0]:.1f} / {r['loadavg_after'][0]:.1f} |"
        )
    out += ["", *checks_table(doc["checks"])]
    return "\n".join(out)


def capacity_check(r: dict) -> Check:
    """A scenario's lines/s while running, over its fleet's capacity."""
    return Check.at_least(
        f"{r['scenario']}: lines/s while running over the fleet's capacity", r["run_x_capacity"], CAPACITY_GOAL
    )


@dataclass(frozen=True)
class W5Params:
    scenarios: tuple[str, ...] = ("one", "two")


class W5Upstream:
    id, slug, title = "W5", "W5-upstream", "Upstream engines, scale by simulation"
    default_rounds = 0
    Params: ClassVar[type[W5Params]] = W5Params

    def run(self, context: Context) -> Report:
        params = parse_params(W5Params, context.params)
        if unknown := set(params.scenarios) - set(SCENARIOS):
            raise ValueError(f"unknown scenario(s) {sorted(unknown)}; choose from {', '.join(SCENARIOS)}")
        runs = []
        for name in params.scenarios:
            runs.append(run(SCENARIOS[name], context.scaled(LINES), context.work_dir).to_dict())
            context.log(json.dumps(runs[-1]))
        failed = any(not r["status"].startswith("completed") for r in runs)
        data = {"runs": runs, "checks": [capacity_check(r).to_dict() for r in runs]}
        return Report(self.id, self.slug, self.title, data, render, failed=failed)
