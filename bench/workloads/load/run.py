"""The load test's run on one backend and layout: 50 concurrent clients for 2 minutes against
`batchd serve` (built-in models); then every batch must end and every file round-trip.

Layouts: `one` is a single `batchd serve` taking the load and running the batches;
`one-unniced` is the same with its engines at the API's niceness (BATCHD_ENGINE_NICENESS=0, as
before 2026-11-24); `split` is an `--api-only` replica taking the load beside a full replica (at
niceness 10) that runs them, both on the same database and data dir.
"""

from __future__ import annotations

import asyncio
import json
import os
import sys
import time
import uuid
from collections.abc import Callable
from pathlib import Path
from typing import Any

import asyncpg
import psutil

from bench.measure import cpu_seconds
from bench.proc import Child
from bench.stages import Recording
from bench.workloads.load.clients import LoadConfig, percentiles, run_load
from bench.workloads.load.verify import verify
from harness.server import ServerProcess

# The worker replica of the split layout yields the CPU to the API-only replica.
WORKER_NICENESS = 10
LAYOUTS = ("one", "one-unniced", "split")
# The probe (bench/workloads/load/probe.py) needs a moment to create its batch before it samples.
PROBE_STARTUP_S = 5.0
# Engines start slowly on a loaded machine (torch.compile unless --enforce-eager).
HEALTHY_TIMEOUT_S = 1800
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
        self.server_pid, self.worker_pid = server_pid, worker_pid
        self.start = self._sample()

    def _sample(self) -> dict[str, float]:
        api_tree = cpu_seconds(self.server_pid, tree=True)
        api = cpu_seconds(self.server_pid)
        worker = cpu_seconds(self.worker_pid, tree=True) if self.worker_pid else 0.0
        machine = psutil.cpu_times()
        return {
            "api": api,
            "engines": api_tree - api + worker,
            "clients": cpu_seconds(),
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


def run_backend(
    backend: str, layout: str, config: LoadConfig, work: Path, enforce_eager: bool, log: Callable[[str], None] = print
) -> dict[str, Any]:
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
        cpu = CpuMeter(server.pid, worker.pid if worker else None)
        # Half the run, 50 samples a second, without pausing the API (its latency is measured).
        profiler = Recording(
            server.pid,
            run_dir / "api-profile.txt",
            rate=50,
            seconds=max(1, int(config.duration_s / 2)),
            nonblocking=True,
        )
        probe_cmd = [sys.executable, "-m", "bench.workloads.load.probe", server.base_url, API_KEY]
        probe = Child([*probe_cmd, str(config.duration_s - PROBE_STARTUP_S)], run_dir / "probe.log").start()
        stats = asyncio.run(run_load(server.base_url, API_KEY, config))
        probe_ms = probe.finish(timeout=120).last_json()
        cpu_spent = cpu.stop()
        profile = profiler.stop()
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
        "cpu_seconds": cpu_spent,
        "api_profile": profile,
        "loadavg_before": [round(x, 2) for x in load_before],
        "loadavg_after": [round(x, 2) for x in load_after],
        "timeline": [(round(t, 3), op, round(s * 1000, 2)) for t, op, s in stats.timeline if op == "batches.retrieve"],
    }
