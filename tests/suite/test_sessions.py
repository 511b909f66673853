"""`make test`'s two sessions (scripts/test-sessions.sh) on a throwaway test directory: an empty
session passes, a failure in either fails the run, as a failing lint beside them does, and a
SIGTERM mid-run still prints what the second session wrote; nothing of the run outlives it."""

from __future__ import annotations

import os
import signal
import sys
import textwrap
from pathlib import Path

import pytest

from harness.poll import wait_until
from harness.process import ManagedProcess, group_alive

SCRIPT = Path(__file__).resolve().parents[2] / "scripts" / "test-sessions.sh"
# How long a blocked test waits for the release file: past any run of this module.
BLOCK_S = 120

CONFTEST = """
import pytest

def pytest_configure(config):
    config.addinivalue_line("markers", "vllm: the first session's")
"""
BLOCKING = """
import pytest, time
from pathlib import Path

HERE = Path(__file__).parent

def block(name):
    (HERE / (name + ".started")).touch()
    deadline = time.monotonic() + {block_s}
    while not (HERE / "release").exists() and time.monotonic() < deadline:
        time.sleep(0.05)
"""


def _tests(root: Path, files: dict[str, str]) -> Path:
    """A test directory of its own (no ini file above it: the repository's settings stay out)."""
    root.mkdir()
    (root / "conftest.py").write_text(CONFTEST)
    for name, body in files.items():
        (root / name).write_text(textwrap.dedent(body))
    return root


def _start(tmp_path: Path, root: Path, *pytest_args: str, lint: str | None = None) -> ManagedProcess:
    # Only the plugins the script needs: the environment's others take seconds to import in each
    # of the interpreters. The second session's log goes to TMPDIR (mktemp).
    (tmp_path / "tmp").mkdir()
    env = {**os.environ, "PYTEST_DISABLE_PLUGIN_AUTOLOAD": "1", "TMPDIR": str(tmp_path / "tmp")}
    env.pop("LINT", None)
    if lint is not None:
        env["LINT"] = lint
    cmd = ["bash", str(SCRIPT), sys.executable, "--rootdir", str(root), str(root), *pytest_args]
    return ManagedProcess(cmd, tmp_path / "run.log", env=env, cwd=root).start()


def _run(tmp_path: Path, files: dict[str, str], *pytest_args: str, lint: str | None = None) -> tuple[int, str]:
    run = _start(tmp_path, _tests(tmp_path / "tests", files), *pytest_args, lint=lint)
    try:
        code = run.wait(120)
        assert code is not None, run.log()
        assert not group_alive(run.pid), "a process of the run outlived it"
        return code, run.log(20_000)
    finally:
        run.kill()


PASSING = {
    "test_first.py": "import pytest\n\n@pytest.mark.vllm\ndef test_engine():\n    pass\n",
    "test_second.py": "def test_version():\n    pass\n\ndef test_other():\n    pass\n",
}


def test_a_selection_without_a_vllm_test_passes(tmp_path):
    code, log = _run(tmp_path, PASSING, "-k", "test_version")
    assert code == 0, log
    assert "1 passed" in log, log
    assert "vLLM session exit 5, the other session exit 0" in log, log


@pytest.mark.parametrize("failing", ["test_first.py", "test_second.py"])
def test_a_failing_test_in_either_session_fails_the_run(tmp_path, failing):
    files = {**PASSING, failing: PASSING[failing] + "\ndef test_fails():\n    assert 1 == 2\n"}
    if failing == "test_first.py":
        files[failing] = files[failing].replace("def test_fails", "@pytest.mark.vllm\ndef test_fails")
    code, log = _run(tmp_path, files)
    assert code != 0, log
    assert f"FAILED {failing}::test_fails" in log, log


@pytest.mark.parametrize("exit_code", [0, 1])
def test_the_lint_runs_beside_the_sessions_and_its_failure_fails_the_run(tmp_path, exit_code):
    script = tmp_path / "lint.sh"
    script.write_text(f"echo the lint ran; exit {exit_code}\n")
    code, log = _run(tmp_path, PASSING, lint=f"bash {script}")
    assert (code == 0) == (exit_code == 0), log
    assert "the lint ran" in log.split("================ the lint:")[1], log
    assert f"the other session exit 0, lint exit {exit_code}" in log, log


def test_a_sigterm_mid_run_prints_what_the_second_session_wrote(tmp_path):
    blocking = BLOCKING.format(block_s=BLOCK_S)
    files = {
        "test_first.py": f"{blocking}\n@pytest.mark.vllm\ndef test_engine():\n    block('first')\n",
        "test_second.py": f"{blocking}\ndef test_quick():\n    pass\n\ndef test_blocked():\n    block('second')\n",
    }
    root = _tests(tmp_path / "tests", files)
    run = _start(tmp_path, root, "-v")
    try:
        started = [root / "first.started", root / "second.started"]
        wait_until(lambda: all(p.exists() for p in started), 60, lambda: f"both sessions' tests:\n{run.log()}")
        wait_until(lambda: "test_second.py::test_quick PASSED" in _second_log(tmp_path), 30, "the quick test's line")
        os.kill(run.pid, signal.SIGTERM)
        # The sessions stop as on Ctrl-C; the second ends its test once released.
        (root / "release").touch()
        code = run.wait(60)
        log = run.log(20_000)
        assert code == 128 + signal.SIGTERM, log
        assert not group_alive(run.pid), "a process of the run outlived it"
    finally:
        run.kill()
    first, second = log.split("the second session: the tests without vLLM")
    assert "test_first.py::test_engine" in first and "test_second.py" not in first, log
    assert "test_second.py::test_quick PASSED" in second, log
    assert "stopped by SIGTERM" in second, log
    assert _second_log(tmp_path) == "", "the second session's log was left behind"


def _second_log(tmp_path: Path) -> str:
    """The second session's log while the run lasts (the only file in its TMPDIR)."""
    logs = [p for p in (tmp_path / "tmp").iterdir() if p.is_file()]
    return logs[0].read_text(errors="replace") if logs else ""
