"""Load test: 50 concurrent clients for 2 minutes against `batchd serve` (built-in models), on
SQLite and on Postgres; then every batch must end and every file round-trip.

    .venv/bin/python -m bench.load [--backends sqlite,postgres] [--layouts one-unniced,one,split]
                                   [--clients 50] [--duration 120] [--name 2026-11-23-load]

Layouts: `one` is a single `batchd serve` taking the load and running the batches;
`one-unniced` is the same with its engines at the API's niceness (BATCHD_ENGINE_NICENESS=0, as
before 2026-11-24); `split` is an `--api-only` replica taking the load beside a full replica (at
niceness 10) that runs them, both on the same database and data dir.

Writes bench/results/<name>.json, .md and .png. Exits 1 if any call failed (other than a 503 with
Retry-After, which is retried) or anything was lost; the p99 target is reported, not enforced.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import dataclasses
import datetime as dt
import json
import os
import subprocess
import sys
import tempfile
import time
import uuid
from pathlib import Path

import asyncpg
import psutil

from bench.load.harness import LoadConfig, percentiles, run_load
from bench.load.profile import Profiler
from bench.load.report import markdown, write_chart
from bench.load.verify import verify
from bench.machine import machine_info
from harness.server import ServerProcess

# The worker replica of the split layout yields the CPU to the API-only replica.
WORKER_NICENESS = 10
LAYOUTS = ("one", "one-unniced", "split")
# The probe (bench/load/probe.py) needs a moment to create its batch before it samples.
PROBE_STARTUP_S = 5.0
# Engines start slowly on a loaded machine (torch.compile unless --enforce-eager).
HEALTHY_TIMEOUT_S = 1800
RESULTS = Path(__file__).parents[1] / "results"
API_KEY = "load-key"
BUILT_IN_MODELS = ("batchd-tiny-chat", "all-MiniLM-L6-v2")
PG_ADMIN = os.environ.get("BATCHD_BENCH_POSTGRES_DSN", "postgresql://postgres@127.0.0.1:5432/postgres")


def start_server(
    work: Path,
    database_url: str | None,
    enforce_eager: bool = False,
    *,
    extra_args: tuple[str, ...] = (),
    niceness: int = 0,
    name: str = "server",
    extra_env: dict[str, str] | None = None,
) -> ServerProcess:
    """`batchd serve` with the built-in models on a free port, launched (not yet healthy). A
    process group of its own but not a session: the kernel schedules each session as one group
    (autogroup), where a niceness counts only against the session's other processes."""
    args: list[str] = []
    if enforce_eager:  # no torch.compile: the engines start minutes sooner on a busy machine
        config = work / "models.json"
        config.write_text(
            json.dumps({"models": {name: {"engine_args": {"enforce_eager": True}} for name in BUILT_IN_MODELS}})
        )
        args += [arg for model in BUILT_IN_MODELS for arg in ("--model", model)] + ["--config", str(config)]
    return ServerProcess(
        work / "data",
        database_url,
        env={"BATCHD_API_KEYS": f"{API_KEY}=load", **(extra_env or {})},
        args=args + list(extra_args),
        models=True,
        session=False,
        niceness=niceness,
        log_path=work / f"{name}.log",
    ).launch()


class CpuMeter:
    """CPU seconds spent during the load by the API process, the engines (with the worker
    replica, if split), this harness (the 50 clients) and the whole machine: where the two CPUs went."""

    def __init__(self, server_pid: int, worker_pid: int | None = None) -> None:
        self.server = psutil.Process(server_pid)
        self.worker = psutil.Process(worker_pid) if worker_pid else None
        self.start = self._sample()

    def _sample(self) -> dict[str, float]:
        def busy(times) -> float:
            return times.user + times.system

        engines = busy(self.worker.cpu_times()) if self.worker else 0.0
        for parent in filter(None, (self.server, self.worker)):
            for child in parent.children(recursive=True):
                with contextlib.suppress(psutil.NoSuchProcess):
                    engines += busy(child.cpu_times())
        machine = psutil.cpu_times()
        return {
            "api": busy(self.server.cpu_times()),
            "engines": engines,
            "clients": busy(psutil.Process().cpu_times()),
            "machine": machine.user
            + machine.system
            + machine.nice
            + getattr(machine, "irq", 0)
            + getattr(machine, "softirq", 0),
            "wall": time.monotonic(),
        }

    def stop(self) -> dict[str, float]:
        end = self._sample()
        spent = {key: round(end[key] - self.start[key], 1) for key in end}
        spent["available"] = round(spent.pop("wall") * (os.cpu_count() or 1), 1)
        return spent


async def _pg(sql: str) -> None:
    conn = await asyncpg.connect(PG_ADMIN, timeout=5)
    try:
        await conn.execute(sql)
    finally:
        await conn.close()


def run_backend(backend: str, layout: str, config: LoadConfig, work: Path, enforce_eager: bool, log=print) -> dict:
    label = backend if layout == "one" else f"{backend}, {layout}"
    database_url = None
    if backend == "postgres":
        name = f"batchd_load_{uuid.uuid4().hex[:10]}"
        asyncio.run(_pg(f'CREATE DATABASE "{name}"'))
        database_url = PG_ADMIN.rsplit("/", 1)[0].replace("postgresql://", "postgresql+asyncpg://", 1) + "/" + name
    run_dir = work / f"{backend}-{layout}"
    run_dir.mkdir(parents=True, exist_ok=True)
    worker = None
    if layout == "split":
        # The API-only replica first: it migrates the database before the worker replica opens it.
        server = start_server(run_dir, database_url, extra_args=("--api-only",), name="api")
    else:
        unniced = {"BATCHD_ENGINE_NICENESS": "0"} if layout == "one-unniced" else None
        server = start_server(run_dir, database_url, enforce_eager, extra_env=unniced)
    try:
        log(f"[{label}] starting batchd serve (built-in models) ...")
        server.wait_healthy(HEALTHY_TIMEOUT_S)
        if layout == "split":
            worker = start_server(run_dir, database_url, enforce_eager, niceness=WORKER_NICENESS, name="worker")
            worker.wait_healthy(HEALTHY_TIMEOUT_S)
        load_before = os.getloadavg()
        log(f"[{label}] {config.clients} clients for {config.duration_s:.0f} s ...")
        cpu = CpuMeter(server.proc.pid, worker.proc.pid if worker else None)
        # Sample the middle of the run, when the engine is saturated.
        profiler = Profiler(server.proc.pid, int(config.duration_s / 2), run_dir / "api-profile.txt")
        probe = subprocess.Popen(
            [
                sys.executable,
                "-m",
                "bench.load.probe",
                server.base_url,
                API_KEY,
                str(config.duration_s - PROBE_STARTUP_S),
            ],
            stdout=subprocess.PIPE,
            text=True,
        )
        stats = asyncio.run(run_load(server.base_url, API_KEY, config))
        probe_ms = json.loads(probe.communicate(timeout=120)[0])
        cpu_seconds = cpu.stop()
        profile = profiler.summary()
        load_after = os.getloadavg()
        log(
            f"[{label}] load done: {sum(len(v) for v in stats.latencies.values())} calls, "
            f"{len(stats.errors)} errors; verifying ..."
        )
        checked = asyncio.run(verify(server.base_url, API_KEY, stats))
    finally:
        for process in filter(None, (worker, server)):
            process.kill()
        if database_url:
            asyncio.run(_pg(f'DROP DATABASE IF EXISTS "{database_url.rsplit("/", 1)[1]}" WITH (FORCE)'))
    return {
        "backend": label,
        "layout": layout,
        "worker_niceness": WORKER_NICENESS if layout == "split" else None,
        "operations": {op: percentiles(values) for op, values in sorted(stats.latencies.items())},
        "probe_retrieve": percentiles([ms / 1000 for ms in probe_ms]),
        "errors": stats.errors,
        "retried_503": dict(stats.retried_503),
        "cancel_conflicts": stats.cancel_conflicts,
        "verify": checked,
        "cpu_seconds": cpu_seconds,
        "api_profile": profile,
        "loadavg_before": [round(x, 2) for x in load_before],
        "loadavg_after": [round(x, 2) for x in load_after],
        "timeline": [(round(t, 3), op, round(s * 1000, 2)) for t, op, s in stats.timeline if op == "batches.retrieve"],
    }


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="python -m bench.load", description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--backends", default="sqlite,postgres")
    parser.add_argument("--layouts", default="one", help=f"a comma-separated list of {', '.join(LAYOUTS)}")
    parser.add_argument("--clients", type=int, default=50)
    parser.add_argument("--duration", type=float, default=120.0)
    parser.add_argument("--think", type=float, default=0.25, help="mean pause between a client's calls (s)")
    parser.add_argument("--enforce-eager", action="store_true", help="engines without torch.compile")
    parser.add_argument("--name", default=f"{dt.date.today().isoformat()}-load")
    parser.add_argument("--results-dir", type=Path, default=RESULTS)
    args = parser.parse_args(argv)
    config = LoadConfig(clients=args.clients, duration_s=args.duration, think_s=args.think)
    work = Path(tempfile.mkdtemp(prefix="batchd-load-"))
    backends = [b.strip() for b in args.backends.split(",") if b.strip()]
    layouts = [layout.strip() for layout in args.layouts.split(",") if layout.strip()]
    if unknown := set(layouts) - set(LAYOUTS):
        parser.error(f"unknown layout(s): {', '.join(sorted(unknown))}")
    report = {
        "date": dt.date.today().isoformat(),
        "config": dataclasses.asdict(config),
        "machine": machine_info(),
        "enforce_eager": args.enforce_eager,
        "runs": [
            run_backend(backend, layout, config, work, args.enforce_eager) for backend in backends for layout in layouts
        ],
    }
    args.results_dir.mkdir(parents=True, exist_ok=True)
    base = args.results_dir / args.name
    base.with_suffix(".json").write_text(json.dumps(report, indent=1))
    write_chart(report, base.with_suffix(".png"))
    base.with_suffix(".md").write_text(markdown(report, base.with_suffix(".png").name))
    print(f"wrote {base}.{{json,md,png}}; work dir {work}")
    failed = any(run["errors"] or run["verify"]["problems"] for run in report["runs"])
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
