"""Benchmark batchd: every workload through one harness, each report written by one writer.

    .venv/bin/python -m bench [--workloads W1,W2,W3,W4] [--scale 1.0] [--rounds N]
                      [--systems limit,peer,runbatch,server] [--param KEY=VALUE ...] [--label -note]

Each workload writes <results-dir>/<date>-<slug><label>.json and .md (and .png when it draws a
chart), with the commit measured. W1–W4 run batchd and vLLM side by side, each system in fresh
processes; with --rounds N every input runs N times, the order rotating each round, and each
system's median round is reported. --scale multiplies a workload's sizes (lines, requests, or
seconds of load) for smoke runs. Exits 1 if a workload says a run failed (targets missed are
reported, not an error); the work directory (inputs, outputs, logs) is then kept.
"""

from __future__ import annotations

import argparse
import dataclasses
import os
import shlex
import shutil
import sys
import tempfile
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from bench.engine import LEGACY_KV_CACHE_ENV
from bench.machine import machine_info
from bench.report import require_matplotlib, write_report
from bench.systems import SYSTEMS
from bench.workload import Context, describe_params, parse_params
from bench.workloads import DEFAULT, WORKLOADS

RESULTS = Path(__file__).parent / "results"


def _names(value: str, known: Mapping[str, Any], what: str) -> list[str]:
    names = [v.strip() for v in value.split(",") if v.strip()]
    if value.strip() == "all" and what == "workloads":
        return list(known)
    unknown = [n for n in names if n not in known]
    if unknown or not names:
        raise argparse.ArgumentTypeError(f"unknown {what} {unknown}; choose from {', '.join(known)}")
    return names


def _param(value: str) -> tuple[str, str]:
    key, sep, text = value.partition("=")
    if not sep or not key.strip():
        raise argparse.ArgumentTypeError(f"expected KEY=VALUE, got {value!r}")
    return key.strip().replace("-", "_"), text


def _workloads_help() -> str:
    return "workloads and their --param defaults:\n" + "\n".join(
        f"  {w.id:<10} {w.title} ({describe_params(w.Params)}; "
        + (f"{w.default_rounds} round(s) by default)" if w.default_rounds else "no rounds)")
        for w in WORKLOADS.values()
    )


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(
        prog="python -m bench",
        description=__doc__,
        epilog=_workloads_help(),
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    parser.add_argument(
        "--workloads",
        type=lambda v: _names(v, WORKLOADS, "workloads"),
        default=list(DEFAULT),
        help=f"comma-separated, or all (default: {','.join(DEFAULT)})",
    )
    parser.add_argument(
        "--systems",
        type=lambda v: _names(v, SYSTEMS, "systems"),
        default=list(SYSTEMS),
        help="W1–W4: comma-separated (default: all)",
    )
    parser.add_argument("--scale", type=float, default=1.0, help="multiplies every workload's size (smoke runs)")
    parser.add_argument(
        "--enforce-eager",
        action="store_true",
        help="start every engine without torch.compile (faster start-up; smoke runs)",
    )
    parser.add_argument(
        "--rounds",
        type=int,
        help="run every input this many times, systems interleaved (default: the workload's own)",
    )
    parser.add_argument(
        "--param",
        type=_param,
        action="append",
        default=[],
        metavar="KEY=VALUE",
        help="a workload's own parameter (see below); repeat",
    )
    parser.add_argument("--label", default="", help="appended to the reports' file names, e.g. -deep-queue")
    parser.add_argument("--seed", type=int, default=0, help="input generation seed")
    parser.add_argument("--results-dir", type=Path, default=RESULTS)
    parser.add_argument("--work-dir", type=Path, help="inputs, outputs and logs (default: a temp dir)")
    parser.add_argument("--keep-work-dir", action="store_true", help="keep the work dir even if all runs succeed")
    parser.add_argument("--timeout", type=float, default=4 * 3600, help="seconds allowed per system run")
    args = parser.parse_args(argv)
    if args.scale <= 0:
        parser.error("--scale must be positive")
    if args.rounds is not None and args.rounds < 1:
        parser.error("--rounds must be at least 1")
    params = dict(args.param)
    args.params = {}
    for name in args.workloads:
        workload = WORKLOADS[name]
        if args.rounds and args.rounds > 1 and not workload.default_rounds:
            parser.error(f"{name} runs once: it takes no --rounds")
        # Each workload gets the parameters it declares; one no workload asked for takes is an error.
        own = {key: value for key, value in params.items() if key in _fields(workload.Params)}
        try:
            parse_params(workload.Params, own)
        except (ValueError, TypeError) as exc:
            parser.error(f"{name}: {exc}")
        args.params[name] = own
    if unused := set(params) - {key for own in args.params.values() for key in own}:
        parser.error(f"no workload asked for takes --param {', '.join(sorted(unused))}")
    return args


def _fields(params: type[Any]) -> set[str]:
    return {field.name for field in dataclasses.fields(params)}


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    require_matplotlib()
    if os.environ.pop(LEGACY_KV_CACHE_ENV, None) is not None:
        print(f"note: ignoring {LEGACY_KV_CACHE_ENV}; each workload sets its own KV cache size", file=sys.stderr)
    work_dir = args.work_dir or Path(tempfile.mkdtemp(prefix="batchd-bench-"))
    work_dir.mkdir(parents=True, exist_ok=True)
    print(f"work dir: {work_dir}", flush=True)
    command = "python -m bench " + shlex.join(sys.argv[1:] if argv is None else argv)

    failed = False
    for name in args.workloads:
        workload = WORKLOADS[name]
        context = Context(
            work_dir=work_dir,
            scale=args.scale,
            rounds=args.rounds or max(1, workload.default_rounds),
            seed=args.seed,
            timeout=args.timeout,
            enforce_eager=args.enforce_eager,
            systems=tuple(args.systems),
            params=args.params[name],
            log=lambda text: print(text, flush=True),
        )
        machine = machine_info()
        report = workload.run(context)
        files = write_report(report, args.results_dir, machine=machine, command=command, label=args.label)
        print(f"wrote {', '.join(str(f) for f in files.values())}", flush=True)
        failed |= report.failed

    if failed or args.keep_work_dir:
        print(f"kept work dir (inputs, outputs, logs): {work_dir}")
    elif args.work_dir is None:
        shutil.rmtree(work_dir, ignore_errors=True)
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
