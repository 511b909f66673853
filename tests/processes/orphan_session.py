"""The session tests/processes/test_no_orphans.py SIGKILLs. Run on its own in a child pytest (the
file name keeps it out of the suite's collection), it starts what a real session starts, mostly
through the suite's fixtures: a `batchd serve`, a `batchd serve` with an engine process, the
SeaweedFS, and a head start in its low-share cpu cgroup with a grandchild in its process group. It
writes what it started to `<basetemp>/started.json` and blocks until it is killed."""

from __future__ import annotations

import json
import sys
import time
from pathlib import Path

import psutil
import pytest

from harness.poll import wait_until
from harness.server import ServerProcess
from tests.support import head_start
from tests.support.batches import CHAT_MODEL
from tests.support.engines import eager_config

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


def _engine_process(server: ServerProcess) -> psutil.Process | None:
    return next((p for p in psutil.Process(server.pid).children(recursive=True) if p.name().startswith("VLLM::")), None)


@pytest.mark.parametrize("backend", ["sqlite"], indirect=True)
def test_start_everything_then_block(start_server, seaweedfs, head_starts, tmp_path_factory):
    server = start_server()
    # A server with an engine, up to the point its engine process runs (about 30 s; no need to
    # wait for it to be healthy): the engine is a grandchild, renamed, in the server's group.
    engine_dir = tmp_path_factory.mktemp("engine")
    config = eager_config(engine_dir / "models.json", {CHAT_MODEL: {}})
    with_engine = ServerProcess(engine_dir / "data", args=["--model", CHAT_MODEL, "--config", str(config)], models=True)
    with_engine.launch()
    try:
        engine = wait_until(lambda: _engine_process(with_engine), 240, "an engine process")
    except BaseException:
        with_engine.kill()
        raise
    (job,) = head_starts.jobs["orphan-session"]
    children = wait_until(psutil.Process(job.proc.pid).children, 30, "the head start's grandchild")
    started = {
        "batchd": server.pid,
        "batchd_with_engine": with_engine.pid,
        "engine": engine.pid,
        "weed": seaweedfs.process.pid,
        "head_start": job.proc.pid,
        "grandchild": [child.pid for child in children],
        "cgroup": str(head_starts.group.path) if head_starts.group.path else None,
    }
    (tmp_path_factory.getbasetemp() / "started.json").write_text(json.dumps(started))
    # Not a wait for anything: the session is to be killed while it runs.
    time.sleep(3600)
