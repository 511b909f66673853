"""No process of a test session outlives it, however it ends: a child pytest starts a
`batchd serve`, one with an engine process, a SeaweedFS and a head start (with a grandchild),
mostly through the suite's own fixtures (tests/processes/orphan_session.py), and is SIGKILLed;
15 s later none of them runs, and the head starts' cpu cgroup is gone."""

from __future__ import annotations

import contextlib
import json
import os
import signal
import sys
from collections.abc import Callable
from pathlib import Path

import psutil
import pytest

from harness.poll import wait_until
from harness.process import ManagedProcess

# Its child session starts a server with an engine (tests/conftest.py: VLLM_FIXTURES).
pytestmark = pytest.mark.vllm

ROOT = Path(__file__).resolve().parents[2]
CHILD = Path(__file__).with_name("orphan_session.py")
# The acceptance bound: every process of a killed session is gone this long after the kill.
GONE_WITHIN_S = 15


def _live(match: Callable[[list[str]], bool]) -> dict[int, str]:
    """{pid: command line} of every process (zombies aside) whose command line `match`es."""
    found = {}
    for proc in psutil.process_iter(["cmdline", "status"]):
        cmdline = proc.info["cmdline"] or []
        if proc.info["status"] != psutil.STATUS_ZOMBIE and match(cmdline):
            found[proc.pid] = " ".join(cmdline)
    return found


def test_a_sigkilled_session_leaves_no_process_behind(tmp_path):
    basetemp = tmp_path / "session"
    cmd = [sys.executable, "-m", "pytest", "-p", "no:cacheprovider", "-q", str(CHILD), "--basetemp", str(basetemp)]
    session = ManagedProcess(cmd, tmp_path / "pytest.log", cwd=ROOT).start()
    watchdog_cmdline = ["harness.watchdog", str(session.pid)]

    def of_session(cmdline: list[str]) -> bool:
        return any(str(basetemp) in arg for arg in cmdline) or cmdline[-2:] == watchdog_cmdline

    try:
        started_file = basetemp / "started.json"
        wait_until(started_file.exists, 300, lambda: f"the child session to start:\n{session.log()}")
        started = json.loads(started_file.read_text())
        assert len(started["grandchild"]) == 1
        pids = {started[name] for name in ("batchd", "batchd_with_engine", "weed", "head_start")}
        pids |= set(started["grandchild"])
        before = _live(of_session)
        assert pids | {session.pid} <= set(before), (started, before)
        # The engine process renames itself (VLLM::EngineCore): it is looked for by its pid.
        assert psutil.Process(started["engine"]).status() != psutil.STATUS_ZOMBIE
        assert sum(cmdline.endswith(" ".join(watchdog_cmdline)) for cmdline in before.values()) == 1, before
        assert started["cgroup"] is None or Path(started["cgroup"]).is_dir()

        os.kill(session.pid, signal.SIGKILL)
        session.proc.wait()

        def survivors() -> list[str]:
            alive = list(_live(of_session).values())
            with contextlib.suppress(psutil.NoSuchProcess):
                if psutil.Process(started["engine"]).status() != psutil.STATUS_ZOMBIE:
                    alive.append(f"engine {started['engine']}")
            if started["cgroup"] and Path(started["cgroup"]).exists():
                alive.append(f"cgroup {started['cgroup']}")
            return alive

        wait_until(lambda: not survivors(), GONE_WITHIN_S, lambda: f"the session's processes to end: {survivors()}")
    finally:
        session.kill()
