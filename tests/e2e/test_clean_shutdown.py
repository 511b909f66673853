"""`batchd serve` with the built-in models, stopped with SIGTERM as a service manager stops it:
it exits 0, and its engines free the shared memory they made, so Python's resource_tracker has
nothing to warn about (it used to print "There appear to be 4 leaked shared_memory objects").

The server is the session's shared SQLite model server, which has served every test on that
backend by then: the test runs right after the last of them (`ends_model_server`, see conftest)."""

from __future__ import annotations

import os
import signal

import pytest

from harness.poll import wait_until
from harness.process import group_alive


@pytest.mark.ends_model_server
@pytest.mark.parametrize("backend", ["sqlite"], indirect=True)
def test_sigterm_exits_0_without_resource_tracker_warnings(model_server):
    proc = model_server.process.proc
    assert proc is not None and proc.poll() is None

    os.kill(proc.pid, signal.SIGTERM)
    assert proc.wait(60) == 0, model_server.log()[-5000:]
    # The resource tracker (a child in the server's process group) reports at its own exit,
    # after the server's: wait for the whole group to be gone before reading the log.
    wait_until(lambda: not group_alive(proc.pid), 30, "the server's process group to end")
    log = model_server.log()
    assert "resource_tracker" not in log and "leaked shared_memory" not in log, log[-5000:]
