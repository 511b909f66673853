"""A pytest session that runs engines in its own process ends with pytest's summary line:
nothing printed after it at exit (the registry used to leave the heap frozen, and nanobind then
reported Triton's objects in it as ~40 lines of "nanobind: leaked ...").

That session is test_registry.py's: its tests (the registry's engines in-process) run in a pytest
of their own, so the engines start once for both purposes; the suite's own session does not
collect that module (conftest.py). The session gets a head start (tests/support/head_start.py)."""

from __future__ import annotations

import os
import sys
from pathlib import Path

from tests.engine.local.conftest import IN_OWN_SESSION
from tests.support import head_start

REPO = Path(__file__).resolve().parents[3]
REGISTRY_TESTS = Path(__file__).with_name("test_registry.py")


def _launch(work_dir: Path) -> list[head_start.BackgroundRun]:
    # No per-test timeout in that session: its engines start in the low-share group, where under a
    # busy suite they may wait past pytest's 900 s before this test takes them; the wait below
    # bounds the session once it runs at the full share.
    cmd = [sys.executable, "-m", "pytest", "-p", "no:cacheprovider", "-o", "timeout=0", "-rA", str(REGISTRY_TESTS)]
    # Its output as a terminal shows it: anything printed at exit lands after the summary.
    env = {**os.environ, IN_OWN_SESSION: "1"}
    return [head_start.BackgroundRun(cmd, work_dir, cwd=REPO, env=env, merge_stderr=True)]


head_start.register(__file__, "registry-session", _launch)


def test_registry_tests_pass_and_their_summary_is_the_last_line(head_starts):
    (session,) = head_starts.take("registry-session")
    run = session.wait(timeout=900)
    # A worker's own "Parent process exited" can land after the summary on a slow host (seen in CI
    # at twice the suite's usual time): it is the worker noticing the exit, not a leak.
    lines = [line for line in run.stdout.splitlines() if line.strip() and "Parent process exited" not in line]
    assert run.returncode == 0, run.stdout[-20_000:]
    assert " passed" in lines[-1] and "failed" not in lines[-1] and "error" not in lines[-1], lines[-40:]
    assert not any("nanobind" in line for line in lines), lines[-40:]
