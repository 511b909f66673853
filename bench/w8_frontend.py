"""W8, the front-end ceiling: how many lines/s one `batchd serve` replica can push through a
zero-latency upstream fleet, and its CPU per line, next to the transport floor.

One replica (SQLite, local blobs) is pinned to CPU 0 and the fake fleet (harness/fake_upstream.py:
4 URLs, 32 requests at once each, answers at once) to CPU 1, with this driver. Beside it, on the
same CPU 0 and the same fleet, the **bare client** (bench/bare_client.py) reads the same JSONL,
POSTs each body with the same concurrency and writes each answer as an output line. Each round
runs both systems on chat lines and on embedding lines, the order of the systems rotated each
round; a ratio is the median of the same-round ratios.

Timings (wall clock, milliseconds): batchd's from `batches.create` to `completed` seen by a
poll (every 0.25 s, then every 20 ms once 90 % of the lines are done: validation and finalize
included; its CPU includes the polls); the bare
client's from its first line read to its output closed. "Fleet-side" rates take the first
request and the last answer the fleet saw, for both. CPU is the server's user + system time
from /proc over the batch, the bare client's from getrusage over its run.

    .venv/bin/python -m bench.w8_frontend [--lines 20000] [--rounds 3] [--kinds chat,embeddings] [--name NAME]
"""

from __future__ import annotations

import argparse
import contextlib
import datetime as dt
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator
from dataclasses import asdict, dataclass
from pathlib import Path

import psutil

from bench.machine import machine_info
from bench.stages import Recording
from harness.client import openai_client
from harness.fake_fleet import FakeFleet, upstream_config
from harness.poll import wait_for_batch
from harness.server import ServerProcess

RESULTS = Path(__file__).resolve().parent / "results"
KEY = "bench-key"
URLS, PER_URL = 4, 32
POLL_S = 0.02
SERVER_CPU, FLEET_CPU = 0, 1
KINDS = {"chat": ("sim-chat", "/v1/chat/completions"), "embeddings": ("sim-embed", "/v1/embeddings")}
SYSTEMS = ("batchd", "bare")
GOALS = {"ratio": 0.6, "cpu_ms": {"chat": 0.15, "embeddings": 0.12}}


@dataclass
class Run:
    system: str
    kind: str
    round: int
    lines: int
    ok: int
    wall_s: float
    fleet_s: float
    cpu_s: float
    fleet_requests: int

    @property
    def lines_per_s(self) -> float:
        return self.lines / self.wall_s

    @property
    def fleet_lines_per_s(self) -> float:
        return self.lines / self.fleet_s if self.fleet_s else 0.0

    @property
    def cpu_ms_per_line(self) -> float:
        return 1000 * self.cpu_s / self.lines

    def to_dict(self) -> dict:
        out = asdict(self)
        for key in ("wall_s", "fleet_s", "cpu_s"):
            out[key] = round(out[key], 3)
        out.update(
            lines_per_s=round(self.lines_per_s, 1),
            fleet_lines_per_s=round(self.fleet_lines_per_s, 1),
            cpu_ms_per_line=round(self.cpu_ms_per_line, 4),
        )
        return out


@contextlib.contextmanager
def on_cpu(cpu: int) -> Iterator[None]:
    """Children started inside inherit this thread's CPU (what `taskset -c` does)."""
    before = os.sched_getaffinity(0)
    os.sched_setaffinity(0, {cpu})
    try:
        yield
    finally:
        os.sched_setaffinity(0, before)


def write_input(path: Path, kind: str, lines: int) -> Path:
    model, url = KINDS[kind]
    with path.open("wb") as out:
        for i in range(lines):
            if kind == "chat":
                body = {"model": model, "messages": [{"role": "user", "content": f"hello {i}"}], "max_tokens": 16}
            else:
                body = {"model": model, "input": f"the quick brown fox jumps over the lazy dog {i}"}
            out.write(json.dumps({"custom_id": f"r-{i}", "method": "POST", "url": url, "body": body}).encode() + b"\n")
    return path


def _cpu(pid: int) -> float:
    times = psutil.Process(pid).cpu_times()
    return times.user + times.system


def _fleet_s(stats: dict) -> float:
    first, last = stats.get("first_at"), stats.get("last_at")
    return last - first if first and last else 0.0


class Bench:
    def __init__(self, work: Path, lines: int, kinds: list[str]) -> None:
        self.work, self.lines, self.kinds = work, lines, kinds
        with on_cpu(FLEET_CPU):
            self.fleet = FakeFleet(work, count=URLS, max_concurrency=PER_URL).start()
        models = {
            model: {"urls": self.fleet.urls, "model": self.fleet.model, "max_concurrency": PER_URL, "endpoints": [url]}
            for model, url in KINDS.values()
        }
        config = upstream_config(work / "w8.json", models)
        self.server = ServerProcess(
            work / "server",
            env={"BATCHD_API_KEYS": KEY, "BATCHD_MAX_BATCH_LINES": str(max(lines, 50_000))},
            models=True,
            args=["--config", str(config)],
        )
        self.server.data_dir.mkdir(parents=True, exist_ok=True)
        with on_cpu(SERVER_CPU):
            self.server.start()
        self.client = openai_client(self.server.base_url, KEY, max_retries=2)
        self.inputs = {kind: write_input(work / f"{kind}.jsonl", kind, lines) for kind in kinds}
        self.file_ids = {
            kind: self.client.files.create(file=path.open("rb"), purpose="batch").id
            for kind, path in self.inputs.items()
        }

    def close(self) -> None:
        self.server.stop()
        self.fleet.stop()

    def _reset_fleet(self) -> None:
        self.fleet.stats_reset()

    def batchd(self, kind: str, round_no: int, profile: Path | None = None) -> tuple[Run, dict]:
        self._reset_fleet()
        recording = Recording(self.server.pid, profile) if profile else None
        if recording:
            time.sleep(1)  # py-spy attaches
        cpu_before, started = _cpu(self.server.pid), time.time()
        batch = self.client.batches.create(
            input_file_id=self.file_ids[kind], endpoint=KINDS[kind][1], completion_window="24h"
        )
        # Polls cost the server CPU being measured: every 0.25 s until the lines are nearly done,
        # then every 20 ms for a millisecond-true end.
        total = self.lines
        wait_for_batch(
            self.client,
            batch.id,
            timeout=3600,
            interval=0.25,
            until=lambda b: (
                b.status != "in_progress" or b.request_counts.completed + b.request_counts.failed >= 0.9 * total
            ),
        )
        batch = wait_for_batch(self.client, batch.id, timeout=3600, interval=POLL_S)
        finished, cpu_s = time.time(), _cpu(self.server.pid) - cpu_before
        stages = recording.stop() if recording else {}
        stats = self.fleet.stats()
        ok = batch.request_counts.completed if batch.status == "completed" else 0
        if batch.output_file_id:
            content = self.client.files.content(batch.output_file_id).content
            ids = {json.loads(line)["custom_id"] for line in content.splitlines()}
            ok = min(ok, len(ids))
        run = Run(
            "batchd", kind, round_no, self.lines, ok, finished - started, _fleet_s(stats), cpu_s, stats["requests"]
        )
        return run, stages

    def bare(self, kind: str, round_no: int) -> Run:
        self._reset_fleet()
        output = self.work / f"bare-{kind}-{round_no}.jsonl"
        cmd = [sys.executable, "-m", "bench.bare_client", "--input", str(self.inputs[kind]), "--output", str(output)]
        cmd += [arg for url in self.fleet.urls for arg in ("--url", url)] + ["--per-url", str(PER_URL)]
        with on_cpu(SERVER_CPU):
            done = subprocess.run(cmd, capture_output=True, text=True, check=True, cwd=Path(__file__).parents[1])
        result = json.loads(done.stdout.strip().splitlines()[-1])
        stats = self.fleet.stats()
        ids = {json.loads(line)["custom_id"] for line in output.read_bytes().splitlines()}
        output.unlink()
        return Run(
            "bare",
            kind,
            round_no,
            self.lines,
            len(ids),
            result["wall_s"],
            _fleet_s(stats),
            result["cpu_s"],
            stats["requests"],
        )


def ratios(runs: list[Run], kind: str, attr: str) -> list[float]:
    """batchd / bare of the same round, for each round."""
    by_round: dict[int, dict[str, Run]] = {}
    for r in runs:
        if r.kind == kind:
            by_round.setdefault(r.round, {})[r.system] = r
    return [getattr(p["batchd"], attr) / getattr(p["bare"], attr) for _, p in sorted(by_round.items())]


def summary(runs: list[Run], kinds: list[str]) -> dict:
    out = {}
    for kind in kinds:
        mine = [r for r in runs if r.kind == kind]
        out[kind] = {
            "ratio_lines_per_s": statistics.median(ratios(runs, kind, "lines_per_s")),
            "round_ratios": [round(x, 3) for x in ratios(runs, kind, "lines_per_s")],
            "ratio_fleet_lines_per_s": statistics.median(ratios(runs, kind, "fleet_lines_per_s")),
            "round_fleet_ratios": [round(x, 3) for x in ratios(runs, kind, "fleet_lines_per_s")],
            **{
                system: {
                    "lines_per_s": statistics.median(r.lines_per_s for r in mine if r.system == system),
                    "fleet_lines_per_s": statistics.median(r.fleet_lines_per_s for r in mine if r.system == system),
                    "cpu_ms_per_line": statistics.median(r.cpu_ms_per_line for r in mine if r.system == system),
                }
                for system in SYSTEMS
            },
        }
    return out


def markdown(report: dict) -> str:
    machine = report["machine"]
    out = [
        f"# W8: front-end ceiling ({report['date']})",
        "",
        f"batchd commit measured: `{machine['batchd_commit']}`. {report['lines']} lines per run, "
        f"{report['rounds']} rounds, systems interleaved and their order rotated each round. One `batchd serve` "
        f"replica (SQLite, local blobs) on CPU {SERVER_CPU}; the fake fleet ({URLS} URLs x {PER_URL} at once, "
        f"no delay) and this driver on CPU {FLEET_CPU}; the bare client (bench/bare_client.py) on CPU {SERVER_CPU}. "
        f"Load average (1/5/15 min) before: {report['loadavg_before']}, after: {report['loadavg_after']} "
        "(the 2-CPU host is shared with other sessions' tests).",
        "",
        "| lines | system | lines/s | x bare (median of rounds) | fleet-side lines/s | x bare | CPU ms/line |",
        "|---|---|---|---|---|---|---|",
    ]
    for kind, s in report["summary"].items():
        for system in SYSTEMS:
            row = s[system]
            ratio = f"{s['ratio_lines_per_s']:.2f} ({', '.join(f'{x:.2f}' for x in s['round_ratios'])})"
            fleet_ratio = f"{s['ratio_fleet_lines_per_s']:.2f}"
            out.append(
                f"| {kind} | {system} | {row['lines_per_s']:.0f} | {ratio if system == 'batchd' else '1'} "
                f"| {row['fleet_lines_per_s']:.0f} | {fleet_ratio if system == 'batchd' else '1'} "
                f"| {row['cpu_ms_per_line']:.3f} |"
            )
    out += ["", "## Goals", "", "| goal | result |", "|---|---|"]
    for kind, s in report["summary"].items():
        ratio, cpu = s["ratio_lines_per_s"], s["batchd"]["cpu_ms_per_line"]
        out.append(
            f"| {kind}: batchd >= {GOALS['ratio']}x bare lines/s | {_verdict(ratio >= GOALS['ratio'])}: {ratio:.2f}x |"
        )
        goal = GOALS["cpu_ms"][kind]
        out.append(f"| {kind}: batchd CPU <= {goal} ms/line | {_verdict(cpu <= goal)}: {cpu:.3f} ms |")
    out += [
        "",
        "## Every run",
        "",
        "| round | lines | system | ok | wall s | lines/s | fleet s | CPU s | CPU ms/line |",
    ]
    out.append("|---|---|---|---|---|---|---|---|---|")
    for r in report["runs"]:
        out.append(
            f"| {r['round']} | {r['kind']} | {r['system']} | {r['ok']} | {r['wall_s']:.3f} | {r['lines_per_s']:.0f} "
            f"| {r['fleet_s']:.3f} | {r['cpu_s']:.3f} | {r['cpu_ms_per_line']:.3f} |"
        )
    for kind, profile in report.get("profiles", {}).items():
        if not profile:
            continue
        out += ["", f"## Where batchd's CPU goes: {kind} (py-spy, {profile['samples']} samples, one extra run)", ""]
        out += ["| stage | share of samples |", "|---|---|"]
        out += [f"| {name} | {share:.1f} % |" for name, share in profile["stages"]]
        out += ["", "Top leaf functions:", ""]
        out += [f"- {share:.1f} % `{name}`" for name, share in profile["leaf_functions"][:10]]
    return "\n".join(out) + "\n"


def _verdict(ok: bool) -> str:
    return "**pass**" if ok else "**fail**"


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--lines", type=int, default=20_000)
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--kinds", default="chat,embeddings")
    parser.add_argument("--no-profile", action="store_true", help="skip the py-spy run of each kind")
    parser.add_argument("--name", default=f"{dt.date.today().isoformat()}-W8-frontend")
    parser.add_argument("--results-dir", type=Path, default=RESULTS)
    args = parser.parse_args(argv)
    kinds = [k for k in args.kinds.split(",") if k]
    work = Path(tempfile.mkdtemp(prefix="batchd-w8-"))
    os.sched_setaffinity(0, {FLEET_CPU})
    report: dict = {"date": dt.date.today().isoformat(), "lines": args.lines, "rounds": args.rounds}
    report["machine"], report["loadavg_before"] = machine_info(), [round(x, 2) for x in os.getloadavg()]
    bench = Bench(work, args.lines, kinds)
    runs: list[Run] = []
    profiles: dict[str, dict] = {}
    try:
        for round_no in range(1, args.rounds + 1):
            order = SYSTEMS if round_no % 2 else SYSTEMS[::-1]
            for kind in kinds:
                for system in order:
                    run = bench.batchd(kind, round_no)[0] if system == "batchd" else bench.bare(kind, round_no)
                    runs.append(run)
                    print(json.dumps(run.to_dict()), flush=True)
        if not args.no_profile:
            for kind in kinds:
                profiles[kind] = bench.batchd(kind, 0, work / f"profile-{kind}.txt")[1]
    finally:
        bench.close()
    report["loadavg_after"] = [round(x, 2) for x in os.getloadavg()]
    report["runs"] = [r.to_dict() for r in runs]
    report["summary"] = summary(runs, kinds)
    report["profiles"] = profiles
    args.results_dir.mkdir(parents=True, exist_ok=True)
    base = args.results_dir / args.name
    base.with_suffix(".json").write_text(json.dumps(report, indent=1))
    base.with_suffix(".md").write_text(markdown(report))
    print(markdown(report))
    print(f"wrote {base}.{{json,md}}; work dir {work}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
