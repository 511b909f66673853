"""The session tests/processes/test_no_orphans.py SIGKILLs: run on its own in a child pytest
(the name keeps it out of the suite's collection), it starts what a real session starts through
the suite's fixtures (a `batchd serve`, the SeaweedFS and a head start in its low-share cpu
cgroup, that one with a grandchild in its process group), writes what it started to
`<basetemp>/started.json` and blocks until it is killed."""

from __future__ import annotations

import json
import sys
import time
from pathlib import Path

import psutil
import pytest

from harness.poll import wait_until
from tests.support import head_start

# The head start's command: a grandchild in its process group, then a wait for the kill; each
# carries the session's base directory in its command line (argv[1]), as everything started here.
_PARENT = (
    "import subprocess, sys, time; "
    "subprocess.Popen([sys.executable, '-c', 'import time; time.sleep(3600)', sys.argv[1]]); "
    "time.sleep(3600)"
)


def _launch(work_dir: Path) -> list[head_start.BackgroundRun]:
    return [head_start.BackgroundRun([sys.executable, "-c", _PARENT, str(work_dir)], work_dir)]


head_start.register(__file__, "orphan-session", _launch)


@pytest.mark.parametrize("backend", ["sqlite"], indirect=True)
def test_start_everything_then_block(start_server, seaweedfs, head_starts, tmp_path_factory):
    server = start_server()
    (job,) = head_starts.jobs["orphan-session"]
    children = wait_until(psutil.Process(job.proc.pid).children, 30, "the head start's grandchild")
    started = {
        "batchd": server.pid,
        "weed": seaweedfs.process.pid,
        "head_start": job.proc.pid,
        "grandchild": [child.pid for child in children],
        "cgroup": str(head_starts.group.path) if head_starts.group.path else None,
    }
    (tmp_path_factory.getbasetemp() / "started.json").write_text(json.dumps(started))
    time.sleep(3600)
