"""`batchd serve` with a built-in model, stopped with SIGTERM as a service manager stops it: it
exits 0, and its engines free the shared memory they made, so Python's resource_tracker has
nothing to warn about (it used to print "There appear to be 4 leaked shared_memory objects")."""

from __future__ import annotations

import os
import signal

import pytest

from harness.poll import wait_until
from harness.process import group_alive
from tests.support.batches import CHAT_MODEL
from tests.support.engines import eager_config


@pytest.mark.parametrize("backend", ["sqlite"], indirect=True)
def test_sigterm_exits_0_without_resource_tracker_warnings(start_server, tmp_path):
    config = eager_config(tmp_path / "models.json", {CHAT_MODEL: {}})
    server = start_server(models=True, args=["--model", CHAT_MODEL, "--config", str(config)])
    proc = server.process.proc
    assert proc is not None

    os.kill(proc.pid, signal.SIGTERM)
    assert proc.wait(60) == 0, server.log()[-5000:]
    # The resource tracker (a child in the server's process group) reports at its own exit,
    # after the server's: wait for the whole group to be gone before reading the log.
    wait_until(lambda: not group_alive(proc.pid), 30, "the server's process group to end")
    log = server.log()
    assert "resource_tracker" not in log and "leaked shared_memory" not in log, log[-5000:]
