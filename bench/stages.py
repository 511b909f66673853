"""The bench's one profiler: a py-spy recording of a batchd front end (W8, the load test),
split by stage of a line's path and summed by leaf function and by file.

py-spy (bench extra) samples the server's Python stacks (``--format raw``: one line per
distinct stack, frames root first, then a count; blocking mode, because non-blocking samples
of a busy loop come back as torn stacks). Idle threads are left out. Each stack goes to the
first stage whose rule matches, in the order below: threads other than the event loop's,
whole phases (validation, finalize, the API), then the per-line work recognisable anywhere on
the stack, then what is left by its leaf. C code (orjson, uvloop, sqlite) has no frames of
its own: its time counts for the Python line that called it."""

from __future__ import annotations

import collections
import shutil
import signal
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

from bench.proc import Child


def _anywhere(*needles: str) -> Callable[[list[str]], bool]:
    return lambda frames: any(needle in frame for frame in frames for needle in needles)


def _leaf(*needles: str) -> Callable[[list[str]], bool]:
    return lambda frames: bool(frames) and any(needle in frames[-1] for needle in needles)


STAGES: list[tuple[str, Callable[[list[str]], bool]]] = [
    # --threads puts "thread (tid): name" first: SQLite runs in aiosqlite's thread, off the loop.
    ("threads beside the event loop (SQLite via aiosqlite)", lambda frames: "MainThread" not in frames[0]),
    ("validation (before the run)", _anywhere("pipeline/validation.py", "pipeline/shards.py")),
    ("finalize (output files)", _anywhere("worker/finalize.py")),
    ("API requests (status polls)", _anywhere("starlette/", "fastapi/", "app/api/", "app/http/")),
    ("checkpoint rows (database)", _anywhere("worker/checkpoint.py", "repositories/shards.py")),
    ("other database work", _anywhere("sqlalchemy/", "aiosqlite/", "asyncpg/", "app/db/")),
    (
        "JSON parse/serialise",
        _leaf("parse_line", "jsonbody.py", "pipeline/lines.py", "_json_body", "orjson", "json/"),
    ),
    ("metrics", _anywhere("core/metrics.py", "prometheus_client/")),
    ("fair gate", _anywhere("pipeline/fair_gate.py")),
    ("upstream HTTP (aiohttp, URL choice)", _anywhere("aiohttp/", "engine/upstream/", "yarl/", "multidict/")),
    ("line tasks (executor, in-flight)", _anywhere("pipeline/executor.py", "engine/inflight.py")),
    ("input read (blob, split, order)", _anywhere("pipeline/jsonl.py", "app/storage/", "pipeline/ordering.py")),
    ("event loop, other", lambda frames: True),
]


# Waits py-spy counts as busy (a thread blocked on a queue): not CPU, left out.
IDLE_LEAVES = ("_connection_worker_thread (aiosqlite/core.py:59)", "_worker (concurrent/futures/thread.py:81)")


def split(raw_lines: list[str], top: int = 15) -> dict[str, Any]:
    """Samples by stage (shares of all samples), the top leaf functions and the files they are in."""
    by_stage: collections.Counter[str] = collections.Counter()
    leaves: collections.Counter[str] = collections.Counter()
    files: collections.Counter[str] = collections.Counter()
    total = 0
    for line in raw_lines:
        stack, _, count = line.rpartition(" ")
        if not count.isdigit() or not stack:
            continue
        n, frames = int(count), stack.split(";")
        leaf = _short(frames[-1])
        if leaf in IDLE_LEAVES:
            continue
        total += n
        leaves[leaf] += n
        files[leaf.rpartition(" (")[2].rstrip(")").rsplit(":", 1)[0]] += n
        stage = next(name for name, rule in STAGES if rule(frames))
        by_stage[stage] += n
    if not total:
        return {}
    return {
        "samples": total,
        "stages": [(name, round(100 * by_stage[name] / total, 1)) for name, _ in STAGES if by_stage[name]],
        "leaf_functions": [(name, round(100 * n / total, 1)) for name, n in leaves.most_common(top)],
        "files": [(name, round(100 * n / total, 1)) for name, n in files.most_common(top)],
    }


def _short(frame: str) -> str:
    """ "func (/long/path/site-packages/pkg/mod.py:12)" -> "func (pkg/mod.py:12)"."""
    name, _, where = frame.partition(" (")
    for marker in ("site-packages/", "/app/", "/python3.11/"):
        if marker in where:
            where = ("app/" if marker == "/app/" else "") + where.split(marker, 1)[1]
            break
    return f"{name} ({where}" if where else name


class Recording:
    """``py-spy record`` of a process: until :meth:`stop` (SIGINT makes py-spy write its file),
    or for ``seconds`` when given. ``nonblocking`` samples without pausing the process (its
    stacks may come back torn; the load test uses it to leave the API's latency alone)."""

    def __init__(
        self, pid: int, out: Path, rate: int = 200, *, seconds: int | None = None, nonblocking: bool = False
    ) -> None:
        self.out, self.seconds = out, seconds
        py_spy = shutil.which("py-spy") or str(Path(sys.executable).with_name("py-spy"))
        cmd = [py_spy, "record", "--pid", str(pid), "--rate", str(rate), "--threads", "--format", "raw"]
        cmd += ["--duration", str(seconds)] if seconds else []
        cmd += ["--nonblocking"] if nonblocking else []
        self.child = Child([*cmd, "--output", str(out)], out.with_suffix(".log")).start()

    def stop(self) -> dict[str, Any]:
        """The split profile ({} when py-spy wrote none)."""
        if self.seconds:
            done = self.child.finish(timeout=self.seconds + 60)
        else:
            done = self.child.interrupt(grace=60)
        if done.returncode == -signal.SIGKILL or not self.out.exists():  # killed: its file may be torn
            return {}
        return split(self.out.read_text(errors="replace").splitlines())
