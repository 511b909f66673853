"""Benchmark batchd against vLLM, side by side, on the same generated input and machine.

    .venv/bin/python -m bench [--workloads W1,W2,W3,W4] [--scale 1.0] [--systems limit,peer,runbatch,server]
                      [--rounds 1]

For each workload writes <results-dir>/<date>-<workload>.json, .md and .png. Systems run one
after the other, each in fresh processes; with --rounds N every input runs N times, the
systems' order rotating each round, and each system's median round is reported (on a shared
2-CPU machine one run's throughput can be off by a fifth). Exits 1 if any available system
failed a run (targets missed are reported, not an error); the work directory (inputs, outputs,
logs) is then kept.
"""

from __future__ import annotations

import argparse
import datetime as dt
import json
import os
import shutil
import sys
import tempfile
from pathlib import Path

from bench.chart import require_matplotlib, write_chart
from bench.engine import LEGACY_KV_CACHE_ENV
from bench.harness import run_workload
from bench.machine import machine_info
from bench.models import prepare_models
from bench.report import build_report, markdown
from bench.systems import SYSTEMS
from bench.workloads import WORKLOADS

RESULTS = Path(__file__).parent / "results"


def _names(value: str, known: dict, what: str) -> list[str]:
    names = [v.strip() for v in value.split(",") if v.strip()]
    unknown = [n for n in names if n not in known]
    if unknown or not names:
        raise argparse.ArgumentTypeError(f"unknown {what} {unknown}; choose from {', '.join(known)}")
    return names


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(
        prog="python -m bench", description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument(
        "--workloads",
        type=lambda v: _names(v, WORKLOADS, "workloads"),
        default=list(WORKLOADS),
        help="comma-separated (default: all)",
    )
    parser.add_argument(
        "--systems",
        type=lambda v: _names(v, SYSTEMS, "systems"),
        default=list(SYSTEMS),
        help="comma-separated (default: all)",
    )
    parser.add_argument("--scale", type=float, default=1.0, help="multiplies every line count (smoke runs)")
    parser.add_argument(
        "--enforce-eager",
        action="store_true",
        help="start every engine without torch.compile (faster start-up; smoke runs)",
    )
    parser.add_argument(
        "--rounds",
        type=int,
        default=1,
        help="run every input this many times, systems interleaved; report each system's median round",
    )
    parser.add_argument("--seed", type=int, default=0, help="input generation seed")
    parser.add_argument("--results-dir", type=Path, default=RESULTS)
    parser.add_argument("--work-dir", type=Path, help="inputs, outputs and logs (default: a temp dir)")
    parser.add_argument("--keep-work-dir", action="store_true", help="keep the work dir even if all runs succeed")
    parser.add_argument("--timeout", type=float, default=4 * 3600, help="seconds allowed per system run")
    args = parser.parse_args(argv)
    if args.scale <= 0:
        parser.error("--scale must be positive")
    if args.rounds < 1:
        parser.error("--rounds must be at least 1")
    return args


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    require_matplotlib()
    if os.environ.pop(LEGACY_KV_CACHE_ENV, None) is not None:
        print(f"note: ignoring {LEGACY_KV_CACHE_ENV}; each workload sets its own KV cache size", file=sys.stderr)

    unavailable = {name: reason for name in args.systems if (reason := SYSTEMS[name].unavailable_reason())}
    work_dir = args.work_dir or Path(tempfile.mkdtemp(prefix="batchd-bench-"))
    work_dir.mkdir(parents=True, exist_ok=True)
    args.results_dir.mkdir(parents=True, exist_ok=True)
    print(f"work dir: {work_dir}", flush=True)
    models = prepare_models(work_dir)

    failed = False
    for workload_id in args.workloads:
        workload = WORKLOADS[workload_id]
        machine = machine_info()
        result = run_workload(
            workload,
            args.systems,
            models,
            work_dir,
            scale=args.scale,
            seed=args.seed,
            timeout=args.timeout,
            unavailable=unavailable,
            enforce_eager=args.enforce_eager,
            rounds=args.rounds,
            log=lambda text: print(text, flush=True),
        )
        machine["load_average_after"] = [round(x, 2) for x in os.getloadavg()]
        report = build_report(result, machine)
        stem = args.results_dir / f"{dt.date.today().isoformat()}-{workload.slug}"
        stem.with_suffix(".json").write_text(json.dumps(report, indent=2) + "\n")
        stem.with_suffix(".md").write_text(markdown(report))
        write_chart(report, stem.with_suffix(".png"))
        print(f"wrote {stem}.json, .md, .png", flush=True)
        failed |= any(run.available and run.error for _, runs in result.runs for run in runs.values())

    if failed or args.keep_work_dir:
        print(f"kept work dir (inputs, outputs, logs): {work_dir}")
    elif args.work_dir is None:
        shutil.rmtree(work_dir, ignore_errors=True)
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
