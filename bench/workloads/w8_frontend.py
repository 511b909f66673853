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

    .venv/bin/python -m bench --workloads W8 [--scale 1.0] [--rounds 3] [--param kinds=chat,embeddings]
                      [--param profile=false]

``--scale`` multiplies the 20,000 lines of each run.
"""

from __future__ import annotations

import contextlib
import json
import os
import statistics
import sys
import time
from collections.abc import Iterator
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any, ClassVar

from bench.compare import median_same_round_ratio, same_round_ratios
from bench.measure import cpu_seconds
from bench.proc import run_logged
from bench.report import Check, Document, Report, checks_table
from bench.stages import Recording
from bench.workload import Context, parse_params, rotated
from harness.client import openai_client
from harness.fake_fleet import FakeFleet, upstream_config
from harness.poll import wait_for_batch
from harness.server import ServerProcess

ROOT = Path(__file__).resolve().parents[2]
LINES = 20_000
KEY = "bench-key"
URLS, PER_URL = 4, 32
POLL_S = 0.02
SERVER_CPU, FLEET_CPU = 0, 1
KINDS = {"chat": ("sim-chat", "/v1/chat/completions"), "embeddings": ("sim-embed", "/v1/embeddings")}
SYSTEMS = ("batchd", "bare")
GOALS: dict[str, Any] = {"ratio": 0.6, "cpu_ms": {"chat": 0.15, "embeddings": 0.12}}


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

    def to_dict(self) -> dict[str, Any]:
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


def _fleet_s(stats: dict[str, Any]) -> float:
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

    def batchd(self, kind: str, round_no: int, profile: Path | None = None) -> tuple[Run, dict[str, Any]]:
        self._reset_fleet()
        recording = Recording(self.server.pid, profile) if profile else None
        if recording:
            time.sleep(1)  # py-spy attaches
        cpu_before, started = cpu_seconds(self.server.pid), time.time()
        batch = self.client.batches.create(
            input_file_id=self.file_ids[kind],
            endpoint=KINDS[kind][1],  # type: ignore[arg-type]  # the client's Literal of OpenAI's endpoints
            completion_window="24h",
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
        finished, cpu_s = time.time(), cpu_seconds(self.server.pid) - cpu_before
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
            done = run_logged(cmd, self.work / f"bare-{kind}-{round_no}.log", cwd=ROOT, timeout=3600)
        if done.returncode != 0:
            raise RuntimeError(f"the bare client failed: {done.failure()}")
        result = done.last_json()
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


def by_round(runs: list[Run], kind: str, system: str, attr: str) -> list[float | None]:
    """``attr`` of ``system``'s runs of ``kind``, in round order."""
    return [getattr(r, attr) for r in sorted(runs, key=lambda r: r.round) if r.kind == kind and r.system == system]


def summary(runs: list[Run], kinds: list[str]) -> dict[str, Any]:
    """Per kind: batchd over bare as medians of same-round ratios, and each system's medians."""
    out = {}
    for kind in kinds:
        mine = [r for r in runs if r.kind == kind]
        per = {
            attr: (by_round(runs, kind, "batchd", attr), by_round(runs, kind, "bare", attr))
            for attr in ("lines_per_s", "fleet_lines_per_s")
        }
        out[kind] = {
            "ratio_lines_per_s": median_same_round_ratio(*per["lines_per_s"]),
            "round_ratios": [_round3(x) for x in same_round_ratios(*per["lines_per_s"])],
            "ratio_fleet_lines_per_s": median_same_round_ratio(*per["fleet_lines_per_s"]),
            "round_fleet_ratios": [_round3(x) for x in same_round_ratios(*per["fleet_lines_per_s"])],
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


def checks(summarized: dict[str, Any]) -> list[Check]:
    """Per kind: batchd's lines/s against the bare client's, and its CPU per line."""
    out = []
    for kind, s in summarized.items():
        times_bare: float = s["ratio_lines_per_s"] or 0.0
        cpu: float = s["batchd"]["cpu_ms_per_line"]
        least, most = GOALS["ratio"], GOALS["cpu_ms"][kind]
        out += [
            Check.at_least(
                f"{kind}: batchd lines/s over the bare client's",
                round(times_bare, 3),
                least,
                value=f"{times_bare:.2f}x",
            ),
            Check.at_most(
                f"{kind}: batchd CPU per line", round(cpu, 4), most, goal=f"<= {most} ms", value=f"{cpu:.3f} ms"
            ),
        ]
    return out


def _round3(value: float | None) -> float | None:
    return None if value is None else round(value, 3)


def render(report: Document) -> str:
    out = [
        f"{report['lines']} lines per run, "
        f"{report['rounds']} rounds, systems interleaved and their order rotated each round. One `batchd serve` "
        f"replica (SQLite, local blobs) on CPU {SERVER_CPU}; the fake fleet ({URLS} URLs x {PER_URL} at once, "
        f"no delay) and this driver on CPU {FLEET_CPU}; the bare client (bench/bare_client.py) on CPU {SERVER_CPU}. "
        "The 2-CPU host is shared with other sessions' tests.",
        "",
        "| lines | system | lines/s | x bare (median of same-round ratios) | fleet-side lines/s | x bare | CPU ms/line |",
        "|---|---|---|---|---|---|---|",
    ]
    for kind, s in report["summary"].items():
        for system in SYSTEMS:
            row = s[system]
            ratio = f"{_x(s['ratio_lines_per_s'])} ({', '.join(_x(x) for x in s['round_ratios'])})"
            fleet_ratio = _x(s["ratio_fleet_lines_per_s"])
            out.append(
                f"| {kind} | {system} | {row['lines_per_s']:.0f} | {ratio if system == 'batchd' else '1'} "
                f"| {row['fleet_lines_per_s']:.0f} | {fleet_ratio if system == 'batchd' else '1'} "
                f"| {row['cpu_ms_per_line']:.3f} |"
            )
    out += ["", "## Goals", "", *checks_table(report["checks"])]
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
    return "\n".join(out)


def _x(value: float | None) -> str:
    return "–" if value is None else f"{value:.2f}"


@dataclass(frozen=True)
class W8Params:
    kinds: tuple[str, ...] = ("chat", "embeddings")
    profile: bool = True  # one extra py-spy run of each kind


class W8Frontend:
    id, slug, title = "W8", "W8-frontend", "Front-end ceiling"
    default_rounds = 3
    Params: ClassVar[type[W8Params]] = W8Params

    def run(self, context: Context) -> Report:
        params = parse_params(W8Params, context.params)
        kinds = list(params.kinds)
        if unknown := set(kinds) - set(KINDS):
            raise ValueError(f"unknown kind(s) {sorted(unknown)}; choose from {', '.join(KINDS)}")
        lines = context.scaled(LINES)
        work = context.work_dir / "W8"
        work.mkdir(parents=True, exist_ok=True)
        before = os.sched_getaffinity(0)
        os.sched_setaffinity(0, {FLEET_CPU})
        bench = Bench(work, lines, kinds)
        runs: list[Run] = []
        profiles: dict[str, dict[str, Any]] = {}
        try:
            for round_no in range(1, context.rounds + 1):
                for kind in kinds:
                    for system in rotated(SYSTEMS, round_no - 1):
                        run = bench.batchd(kind, round_no)[0] if system == "batchd" else bench.bare(kind, round_no)
                        runs.append(run)
                        context.log(json.dumps(run.to_dict()))
            if params.profile:
                for kind in kinds:
                    profiles[kind] = bench.batchd(kind, 0, work / f"profile-{kind}.txt")[1]
        finally:
            bench.close()
            os.sched_setaffinity(0, before)
        summarized = summary(runs, kinds)
        data = {
            "lines": lines,
            "rounds": context.rounds,
            "runs": [r.to_dict() for r in runs],
            "summary": summarized,
            "profiles": profiles,
            "checks": [c.to_dict() for c in checks(summarized)],
        }
        failed = any(r.ok != r.lines for r in runs)
        return Report(self.id, self.slug, self.title, data, render, failed=failed)
