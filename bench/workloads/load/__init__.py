"""Load test: many concurrent API clients (official `openai` async client each) against one
`batchd serve` with the built-in models while their batches keep the engine busy; then every
batch must end with each custom_id once and every file must round-trip.

    .venv/bin/python -m bench --workloads load [--enforce-eager] [--scale 1.0]
        [--param backends=sqlite,postgres] [--param layouts=one] [--param clients=50] [--param think=0.25]

``--scale`` multiplies the 120 s of load. The run fails (exit 1) if any call failed (other than
a 503 with Retry-After, which is retried) or anything was lost; the p99 target is reported.
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass
from typing import ClassVar

from bench.report import Report
from bench.workload import Context, parse_params
from bench.workloads.load.clients import LoadConfig
from bench.workloads.load.report import render, retrieve_p99_check, write_chart
from bench.workloads.load.run import LAYOUTS, run_backend

DURATION_S = 120.0


@dataclass(frozen=True)
class LoadParams:
    backends: tuple[str, ...] = ("sqlite", "postgres")
    layouts: tuple[str, ...] = ("one",)
    clients: int = 50
    think: float = 0.25  # mean pause between a client's calls (s)


class Load:
    id, slug, title = "load", "load", "Load test"
    default_rounds = 0
    Params: ClassVar[type[LoadParams]] = LoadParams

    def run(self, context: Context) -> Report:
        params = parse_params(LoadParams, context.params)
        if unknown := set(params.layouts) - set(LAYOUTS):
            raise ValueError(f"unknown layout(s) {sorted(unknown)}; choose from {', '.join(LAYOUTS)}")
        config = LoadConfig(clients=params.clients, duration_s=DURATION_S * context.scale, think_s=params.think)
        work = context.work_dir / "load"
        runs = [
            run_backend(backend, layout, config, work, context.enforce_eager, context.log)
            for backend in params.backends
            for layout in params.layouts
        ]
        for run in runs:
            run["checks"] = [retrieve_p99_check(run).to_dict()]
        # Every retrieve's latency, run by run, in the compressed samples file.
        samples = {"retrieve_timelines": [run.pop("timeline") for run in runs]}
        data = {"config": dataclasses.asdict(config), "enforce_eager": context.enforce_eager, "runs": runs}
        failed = any(run["errors"] or run["verify"]["problems"] for run in runs)
        return Report(self.id, self.slug, self.title, data, render, write_chart, failed=failed, samples=samples)
