"""`batchd serve` whose engines cannot start (a broken model directory) says why on stderr and
exits non-zero, so that a supervisor restarts it; it does not sit at a 503 /health forever."""

from __future__ import annotations

import json
import os
import sys
from pathlib import Path

import pytest

from harness.ports import free_port
from harness.process import ManagedProcess

ROOT = Path(__file__).resolve().parents[2]
# Importing vLLM and failing on the model: room for a host twice as slow as CI's.
EXIT_WITHIN_S = 300


@pytest.mark.engine
def test_serve_exits_non_zero_naming_the_cause(tmp_path):
    broken = tmp_path / "broken-model"
    broken.mkdir()
    (broken / "config.json").write_text(json.dumps({"model_type": "no-such-architecture"}))
    env = {k: v for k, v in os.environ.items() if not k.startswith("BATCHD_")}
    env |= {"PYTHONPATH": str(ROOT), "BATCHD_DATA_DIR": str(tmp_path / "data")}
    cmd = [sys.executable, "-m", "app.cli", "serve", "--port", str(free_port()), "--model", f"broken={broken}"]
    server = ManagedProcess(cmd, tmp_path / "serve.log", stderr_path=tmp_path / "serve.err", env=env, cwd=tmp_path)
    server.start()
    try:
        code = server.wait(EXIT_WITHIN_S)
    finally:
        server.stop()
    stderr = (tmp_path / "serve.err").read_text()
    assert code == 3, stderr[-3000:]
    assert "batchd: the model engines could not start: " in stderr
    (line,) = [x for x in stderr.splitlines() if x.startswith("batchd: the model engines could not start: ")]
    assert len(line) > len("batchd: the model engines could not start: ") + 5  # the cause, not nothing
    assert "--no-models serves the API alone" in stderr


def test_health_names_the_engines_failure():
    from types import SimpleNamespace

    from app.api.health import ENGINES_FAILED, _engines

    failed = SimpleNamespace(engines_failed="ValidationError: no such architecture", ready=False, engines=None)
    assert _engines(failed) == (ENGINES_FAILED, {"error": "ValidationError: no such architecture"})
    starting = SimpleNamespace(engines_failed=None, ready=False, engines=None)
    assert _engines(starting)[0] == "starting"
