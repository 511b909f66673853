"""`batchd run-batch` whose engine core is SIGKILLed mid-run: it restarts the engine, runs the
lines that were in flight again and writes every line exactly once."""

from __future__ import annotations

import contextlib
import json
import os
import signal
import subprocess
import time

import psutil
import pytest

from harness.server import BATCHD
from tests.support.batches import CHAT_MODEL, chat_line, jsonl
from tests.support.engines import EAGER_FLAG

# run-batch runs the built-in models in process (tests/conftest.py: VLLM_FIXTURES).
pytestmark = pytest.mark.vllm

LINES = 600
KILL_AT = 100


def _engine_core(pid: int) -> psutil.Process | None:
    return next((p for p in psutil.Process(pid).children() if p.name() == "VLLM::EngineCore"), None)


def test_a_killed_engine_core_is_restarted_and_every_line_written_once(tmp_path):
    source, out = tmp_path / "in.jsonl", tmp_path / "out.jsonl"
    source.write_bytes(jsonl([chat_line(f"r{i}", f"question {i}", max_tokens=8) for i in range(LINES)]))
    partial = tmp_path / "out.jsonl.partial"
    cmd = [str(BATCHD), "run-batch", "-i", str(source), "-o", str(out), "--model", CHAT_MODEL]
    cmd += [EAGER_FLAG, "--max-num-seqs", "16", "--data-dir", str(tmp_path / "models")]
    env = {**os.environ, "BATCHD_ENGINE_RESTART_BACKOFF_SECONDS": "0.5"}
    proc = subprocess.Popen(cmd, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, env=env, start_new_session=True)
    try:
        deadline = time.monotonic() + 600
        while not (partial.exists() and partial.read_bytes().count(b"\n") >= KILL_AT):
            assert proc.poll() is None and time.monotonic() < deadline, "run-batch ended before its engine was killed"
            time.sleep(0.05)
        core = _engine_core(proc.pid)
        assert core is not None
        core.kill()
        _, stderr = proc.communicate(timeout=600)
    finally:
        with contextlib.suppress(ProcessLookupError):
            os.killpg(proc.pid, signal.SIGKILL)  # never leak engines into the suite
        proc.wait()

    assert proc.returncode == 0, stderr.decode()[-3000:]
    lines = [json.loads(raw) for raw in out.read_bytes().splitlines()]
    ids = [line["custom_id"] for line in lines]
    assert len(ids) == LINES and set(ids) == {f"r{i}" for i in range(LINES)}
    assert all(line["response"]["status_code"] == 200 for line in lines)
    assert stderr.count(b"was killed by SIGKILL; restarting it") == 1, stderr.decode()[-3000:]
