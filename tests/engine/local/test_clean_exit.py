"""A pytest session that starts and stops an engine in its own process ends with pytest's
summary line: nothing printed after it at exit (the registry used to leave the heap frozen, and
nanobind then reported Triton's objects in it as ~40 lines of "nanobind: leaked ...")."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parents[3]

SESSION = """
import asyncio
from dataclasses import replace

from app.engine.config.catalog import builtin_model_specs
from app.engine.local.registry import EngineRegistry


def test_an_engine_starts_and_stops(tmp_path):
    async def start_and_stop():
        registry = EngineRegistry()
        specs = [s for s in builtin_model_specs(tmp_path) if s.name == "batchd-tiny-chat"]
        await registry.start([replace(s, engine_args={**s.engine_args, "enforce_eager": True}) for s in specs])
        await registry.shutdown()

    asyncio.run(start_and_stop())
"""


def test_the_summary_is_the_last_line_after_an_engine_ran_in_process(tmp_path):
    (tmp_path / "test_engine_session.py").write_text(SESSION)
    run = subprocess.run(
        [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", str(tmp_path)],
        cwd=REPO,
        env={**os.environ, "PYTHONPATH": str(REPO), "HF_HUB_OFFLINE": "1"},
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
        timeout=600,
    )
    lines = [line for line in run.stdout.splitlines() if line.strip()]
    assert run.returncode == 0, run.stdout[-5000:]
    assert "1 passed" in lines[-1], lines[-40:]
    assert not any("nanobind" in line for line in lines), lines[-40:]
