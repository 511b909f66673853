"""A process that ran engines in-process exits with nothing printed after its last line (the
registry used to leave the heap frozen, and nanobind then reported Triton's objects in it as ~40
lines of "nanobind: leaked ..." at exit, after pytest's summary). The process is a small script
(registry_exit.py) with a head start (tests/support/head_start.py); test_registry.py's tests run
in the suite's own session."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

from tests.engine.local.registry_exit import DONE
from tests.support import head_start

REPO = Path(__file__).resolve().parents[3]

pytestmark = pytest.mark.vllm


def _launch(work_dir: Path) -> list[head_start.BackgroundRun]:
    cmd = [sys.executable, "-m", "tests.engine.local.registry_exit", str(work_dir / "data")]
    # Its output as a terminal shows it: anything printed at exit lands after DONE.
    return [head_start.BackgroundRun(cmd, work_dir, cwd=REPO, merge_stderr=True)]


head_start.register(__file__, "registry-exit", _launch)


def test_a_process_that_ran_engines_exits_after_its_last_line(head_starts):
    (process,) = head_starts.take("registry-exit")
    # Its engine starts in the low-share group, where a busy suite may hold it for minutes.
    run = process.wait(timeout=900)
    # A worker's own "Parent process exited" can land after the last line on a slow host (seen in
    # CI at twice the suite's usual time): it is the worker noticing the exit, not a leak.
    # The resource tracker's "leaked semaphore" warning came once (CI, 1 run in 3) from this script,
    # whose shutdown is the registry's alone: `batchd serve`'s, which frees them, is
    # tests/e2e/test_clean_shutdown.py's point; this test's is the frozen heap's nanobind report.
    lines = [
        line
        for line in run.stdout.splitlines()
        if line.strip() and "Parent process exited" not in line and "resource_tracker" not in line
    ]
    assert run.returncode == 0, run.stdout[-20_000:]
    assert lines[-1] == DONE, lines[-40:]
    assert not any("nanobind" in line for line in lines), lines[-40:]
