"""Run one workload on every selected system, one system at a time, on the same generated
input and machine; each (system, input) gets fresh processes and its own directory."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, replace
from pathlib import Path

from bench.engine import EngineSettings
from bench.models import Models
from bench.result import SystemRun, median_run
from bench.systems import SYSTEMS, RunSpec
from bench.workloads import PreparedRun, Workload, prepare


@dataclass
class WorkloadResult:
    workload: Workload
    engine: EngineSettings
    scale: float
    seed: int
    rounds: int
    # One entry per input size: the input and each system's run of it, in system order.
    runs: list[tuple[PreparedRun, dict[str, SystemRun]]]


def run_workload(
    workload: Workload,
    systems: list[str],
    models: Models,
    work_dir: Path,
    *,
    scale: float,
    seed: int,
    timeout: float,
    unavailable: dict[str, str],
    enforce_eager: bool = False,
    rounds: int = 1,
    log: Callable[[str], None] = print,
) -> WorkloadResult:
    """Prepare the inputs and run them ``rounds`` times, systems interleaved; each system's
    result is its median round. A system's failure is recorded, never raised.
    ``unavailable`` maps system names that cannot run here to the reason."""
    directory = work_dir / workload.slug
    prepared = prepare(workload, models, directory / "inputs", scale=scale, seed=seed)
    if enforce_eager:
        prepared = replace(prepared, engine=replace(prepared.engine, enforce_eager=True))
    runs = []
    for item in prepared.runs:
        rounds_of: dict[str, list[SystemRun]] = {name: [] for name in systems if name not in unavailable}
        for name in systems:
            if name in unavailable:
                log(f"[{workload.id} {item.label}] {name}: unavailable ({unavailable[name]})")
        for round_ in range(rounds):
            for name in _rotated(list(rounds_of), round_):
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
                rounds_of[name].append(_checked(name, item.lines, lambda name=name, spec=spec: SYSTEMS[name].run(spec)))
                log(f"{label} {name}: {_one_line(rounds_of[name][-1])}")
        results = {
            name: median_run(rounds_of[name])
            if name in rounds_of
            else SystemRun.unavailable(name, item.lines, unavailable[name])
            for name in systems
        }
        runs.append((item, results))
    return WorkloadResult(workload, prepared.engine, scale, seed, rounds, runs)


def _rotated(names: list[str], round_: int) -> list[str]:
    """Each round starts one system later, so no system always runs first, on cold caches."""
    shift = round_ % len(names) if names else 0
    return names[shift:] + names[:shift]


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
