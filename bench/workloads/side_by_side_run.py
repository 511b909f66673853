"""Run one side-by-side workload on every selected system, one system at a time, on the same
generated input and machine; each (system, input) gets fresh processes and its own directory."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, replace
from functools import partial

from bench.engine import EngineSettings
from bench.models import Models
from bench.result import SystemRun, median_run
from bench.systems import SYSTEMS, RunSpec
from bench.workload import Context, rotated
from bench.workloads.side_by_side import PreparedRun, SideBySide, prepare


@dataclass
class WorkloadResult:
    workload: SideBySide
    engine: EngineSettings
    scale: float
    seed: int
    rounds: int
    # One entry per input size: the input and each system's run of it, in system order.
    runs: list[tuple[PreparedRun, dict[str, SystemRun]]]


def run_workload(
    workload: SideBySide,
    systems: list[str],
    models: Models,
    context: Context,
    *,
    unavailable: dict[str, str],
) -> WorkloadResult:
    """Prepare the inputs and run them ``context.rounds`` times, systems interleaved; each
    system's result is its median round. A system's failure is recorded, never raised.
    ``unavailable`` maps system names that cannot run here to the reason."""
    scale, seed, timeout, rounds, log = context.scale, context.seed, context.timeout, context.rounds, context.log
    directory = context.work_dir / workload.slug
    prepared = prepare(workload, models, directory / "inputs", scale=scale, seed=seed)
    if context.enforce_eager:
        prepared = replace(prepared, engine=replace(prepared.engine, enforce_eager=True))
    runs = []
    for item in prepared.runs:
        rounds_of: dict[str, list[SystemRun]] = {name: [] for name in systems if name not in unavailable}
        for name in systems:
            if name in unavailable:
                log(f"[{workload.id} {item.label}] {name}: unavailable ({unavailable[name]})")
        for round_ in range(rounds):
            for name in rotated(list(rounds_of), round_):
                run_dir = directory / (f"{name}-{item.lines}" + (f"-r{round_ + 1}" if rounds > 1 else ""))
                run_dir.mkdir(parents=True, exist_ok=True)
                spec = RunSpec(
                    prepared.engine,
                    prepared.endpoint,
                    item.input_path,
                    item.lines,
                    prepared.warmup_path,
                    run_dir,
                    timeout,
                )
                label = f"[{workload.id} {item.label}" + (f" round {round_ + 1}/{rounds}]" if rounds > 1 else "]")
                log(f"{label} {name}: running ...")
                rounds_of[name].append(_checked(name, item.lines, partial(SYSTEMS[name].run, spec)))
                log(f"{label} {name}: {_one_line(rounds_of[name][-1])}")
        results = {
            name: median_run(rounds_of[name])
            if name in rounds_of
            else SystemRun.unavailable(name, item.lines, unavailable[name])
            for name in systems
        }
        runs.append((item, results))
    return WorkloadResult(workload, prepared.engine, scale, seed, rounds, runs)


def _checked(name: str, lines: int, call: Callable[[], SystemRun]) -> SystemRun:
    try:
        run = call()
    except Exception as exc:  # noqa: BLE001 - one system's crash must not end the comparison
        return SystemRun.failed_run(name, lines, f"{type(exc).__name__}: {exc}")
    if run.error is None and run.ok != lines:
        run.error = f"only {run.ok} of {lines} lines succeeded ({run.failed} failed)"
    return run


def _one_line(run: SystemRun) -> str:
    if run.error:
        return "FAILED: " + run.error.splitlines()[0]
    tok = f", {run.output_tokens_per_s:.0f} out tok/s" if run.output_tokens_per_s else ""
    return (
        f"{run.processing_s:.1f} s processing, {run.wall_s:.1f} s wall, {run.lines_per_s:.1f} lines/s{tok}, "
        f"peak RSS {run.peak_rss_mb:.0f} MB"
    )
