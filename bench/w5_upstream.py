"""W5, scale by simulation: batchd in front of a simulated upstream fleet whose capacity is
known, to show the front-end keeps such a fleet busy and what it costs per line.

Each simulated URL answers a request after 200 ms, at most 32 at once (the rest queue, as in
vLLM's scheduler): 160 lines/s per URL. Scenario ``one``: one replica (SQLite) in front of 4
URLs (640 lines/s). Scenario ``two``: two replicas on one Postgres and one blob directory in
front of 8 URLs (1,280 lines/s). The whole fleet is one asyncio (uvloop) process, so it costs
little of the CPU being measured; its own CPU is reported too.

Timings are wall clock to the millisecond: the run as the fleet saw it (its first request to
its last answer) and end to end (`batches.create` to `completed`, polled every 0.25 s and every
20 ms once 90 % of the lines are done). The report goes to bench/results/<name>.{md,json} with
the commit measured.

    .venv/bin/python -m bench.w5_upstream [--lines 20000] [--scenarios one,two] [--name NAME]
"""

from __future__ import annotations

import argparse
import datetime as dt
import json
import os
import tempfile
import threading
import time
from dataclasses import dataclass, field
from pathlib import Path

import psutil

from bench.machine import machine_info
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
    loadavg_before: tuple = ()
    loadavg_after: tuple = ()
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

    def to_dict(self) -> dict:
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


def _cpu(pid: int) -> float:
    """CPU seconds of a process and its children."""
    proc = psutil.Process(pid)
    total = sum(proc.cpu_times()[:2])
    for child in proc.children(recursive=True):
        try:
            total += sum(child.cpu_times()[:2])
        except psutil.NoSuchProcess:
            pass
    return total


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
        cpu_before = [_cpu(s.pid) for s in servers]
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
        result.replica_cpu_s = [_cpu(s.pid) - before for s, before in zip(servers, cpu_before, strict=True)]
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


def report(results: list[Result]) -> str:
    out = [
        "# W5: upstream engines, scale by simulation",
        "",
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
    for r in results:
        s = r.scenario
        out.append(
            f"| {s.name}: {s.replicas} replica(s), {s.urls} URLs, {'Postgres' if s.postgres else 'SQLite'} "
            f"| {s.capacity:.0f}/s | {r.lines} | {r.status} | {r.run_rate:.1f} | {r.run_rate / s.capacity:.3f} "
            f"| {r.total_rate:.1f} | {r.total_rate / s.capacity:.3f} | {r.cpu_ms_per_line:.3f} "
            f"({' + '.join(f'{c:.1f}' for c in r.replica_cpu_s)} s) "
            f"| {1000 * r.fleet_cpu_s / max(1, r.fleet_requests):.2f} "
            f"| {r.loadavg_before[0]:.1f} / {r.loadavg_after[0]:.1f} |"
        )
    return "\n".join(out) + "\n"


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--lines", type=int, default=20_000)
    parser.add_argument("--scenarios", default="one,two")
    parser.add_argument("--name", default=f"{dt.date.today().isoformat()}-W5-upstream")
    parser.add_argument("--results-dir", type=Path, default=Path(__file__).resolve().parent / "results")
    parser.add_argument("--work-dir", type=Path, help="keep logs here (default: a temporary directory)")
    args = parser.parse_args(argv)
    results = []
    work = args.work_dir or Path(tempfile.mkdtemp(prefix="batchd-w5-"))
    work.mkdir(parents=True, exist_ok=True)
    machine = machine_info()
    for name in args.scenarios.split(","):
        results.append(run(SCENARIOS[name], args.lines, work))
        print(report(results[-1:]), flush=True)
    print(f"logs: {work}")
    text = report(results) + f"\nbatchd commit measured: `{machine['batchd_commit']}`.\n"
    args.results_dir.mkdir(parents=True, exist_ok=True)
    base = args.results_dir / args.name
    base.with_suffix(".md").write_text(text)
    payload = {"date": dt.date.today().isoformat(), "machine": machine, "runs": [r.to_dict() for r in results]}
    base.with_suffix(".json").write_text(json.dumps(payload, indent=1))
    print(text)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
