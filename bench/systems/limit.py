"""The "limit" system: vLLM's ``LLM`` class fed the whole input in one call, in its own
process (:mod:`bench.limit_runner`). The best the engine can do with these settings."""

from __future__ import annotations

import json
import os
import sys
from pathlib import Path

from bench.engine import engine_env
from bench.limit_runner import RESULT_PREFIX
from bench.proc import run_logged
from bench.result import SystemRun
from bench.systems.base import RunSpec

REPO = Path(__file__).resolve().parents[2]


class LimitSystem:
    name = "limit"
    description = (
        "vLLM `LLM.chat` / `LLM.embed` on the parsed input, one call (no files, no HTTP), "
        "in batchd's line order and on batchd's engine allocator"
    )
    timing = "the measured call only, timed inside the process (input parsed and a warm-up run before)"

    def unavailable_reason(self) -> str | None:
        return None

    def run(self, spec: RunSpec) -> SystemRun:
        cmd = [
            sys.executable,
            "-m",
            "bench.limit_runner",
            "--engine",
            spec.engine.to_json(),
            "--input",
            str(spec.input_path),
            "--warmup",
            str(spec.warmup_path),
        ]
        env = engine_env({"PYTHONPATH": _pythonpath()})
        done = run_logged(
            cmd,
            spec.work_dir / "limit.log",
            env=env,
            cwd=REPO,
            markers={"result": "^" + RESULT_PREFIX + "(.*)$"},
            timeout=spec.timeout,
        )
        if done.returncode != 0 or "result" not in done.matches:
            return SystemRun.failed_run(self.name, spec.lines, done.failure())
        result = json.loads(done.matches["result"].group(1))
        return SystemRun(
            self.name,
            spec.lines,
            ok=result["ok"],
            failed=result["lines"] - result["ok"],
            prompt_tokens=result["prompt_tokens"],
            output_tokens=result["output_tokens"],
            wall_s=done.wall_s,
            processing_s=result["finished"] - result["started"],
            startup_s=result["engine_ready"] - done.spawned,
            timing=self.timing,
            rss=done.rss.summary((result["started"], result["finished"])),
        )


def _pythonpath() -> str:
    """The repo first, so the child can import :mod:`bench`."""
    existing = os.environ.get("PYTHONPATH")
    return f"{REPO}{os.pathsep}{existing}" if existing else str(REPO)
