"""The "runbatch" system: ``batchd run-batch``, batchd's executor without the server, invoked
like the peer (``-i/-o/--model/--served-model-name/--dtype/--max-model-len``) plus the same
``--config`` file the server gets."""

from __future__ import annotations

import sys
from pathlib import Path

from bench.engine import engine_env
from bench.outputs import scan_results
from bench.proc import CommandFailed, output, run_logged
from bench.result import SystemRun
from bench.systems.base import RunSpec

BATCHD = Path(sys.executable).with_name("batchd")
# Its closing stderr line: "done: N lines (ok X, failed Y) in S s; ..." (read loosely).
SUMMARY = r"done: .*?\bin ([0-9.]+) ?s\b"


class RunBatchSystem:
    name = "runbatch"
    description = "`batchd run-batch -i IN -o OUT` (batchd's batch executor as a command)"
    timing = (
        "its own closing summary ('done: ... in S s', engine start excluded); if absent, the "
        "wall clock from spawn to the output file's last write (start-up included)"
    )

    def unavailable_reason(self) -> str | None:
        if not BATCHD.exists():
            return f"{BATCHD} not found"
        try:
            output([str(BATCHD), "run-batch", "--help"])
        except CommandFailed as exc:
            return (
                "`batchd run-batch` is not available on this install: " + (exc.stderr.strip().splitlines() or ["?"])[-1]
            )
        return None

    def run(self, spec: RunSpec) -> SystemRun:
        output = spec.work_dir / "runbatch-output.jsonl"
        config = spec.engine.write_batchd_config(spec.work_dir / "runbatch-models.yaml")
        engine = spec.engine
        cmd = [
            str(BATCHD),
            "run-batch",
            "-i",
            str(spec.input_path),
            "-o",
            str(output),
            "--model",
            engine.path,
            "--served-model-name",
            engine.served_name,
            "--dtype",
            engine.dtype,
            "--max-model-len",
            str(engine.max_model_len),
            "--config",
            str(config),
        ]
        # cwd: anything it keeps in ./data lands in the run's directory.
        done = run_logged(
            cmd,
            spec.work_dir / "runbatch.log",
            env=engine_env(),
            cwd=spec.work_dir,
            markers={"summary": SUMMARY},
            timeout=spec.timeout,
        )
        if done.returncode != 0 or not output.exists():
            return SystemRun.failed_run(self.name, spec.lines, done.failure())
        finished = output.stat().st_mtime
        run = SystemRun(self.name, spec.lines, wall_s=done.wall_s)
        if "summary" in done.matches:
            run.processing_s = float(done.matches["summary"].group(1))
            started = finished - run.processing_s
            run.startup_s = started - done.spawned
            run.timing = "its own summary line ('done: ... in S s'; engine start excluded)"
        else:
            started = done.spawned
            run.processing_s = finished - started
            run.timing = "wall clock, spawn to the output's last write (no summary line; start-up included)"
        run.count(scan_results(output))
        run.rss = done.rss.summary((started, finished))
        return run
