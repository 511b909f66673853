"""The benchmark harness end to end at a tiny scale, so it cannot rot: every system runs W1 on
the same generated input and the JSON, Markdown and PNG reports are written.

Four engine starts one after the other, about three minutes: the run gets a head start when the
session starts (tests/support/head_start.py) and this test checks what it wrote."""

from __future__ import annotations

import json
import sys
from pathlib import Path

import pytest

from tests.support import head_start

# The bench harness on real engines, a head start (tests/conftest.py: VLLM_FIXTURES).
pytestmark = pytest.mark.vllm

ROOT = Path(__file__).parents[2]


def _launch(work_dir: Path) -> list[head_start.BackgroundRun]:
    results = work_dir / "results"
    cmd = [
        sys.executable,
        "-m",
        "bench",
        "--workloads",
        "W1",
        "--scale",
        "0.01",
        "--enforce-eager",
        "--results-dir",
        str(results),
    ]
    return [head_start.BackgroundRun(cmd, work_dir, cwd=ROOT)]


head_start.register(__file__, "bench-smoke", _launch)


def test_bench_harness_smoke(head_starts):
    (run,) = head_starts.take("bench-smoke")
    done = run.wait(timeout=1200)
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
    reports = {p.suffix: p for p in (run.work_dir / "results").iterdir()}
    assert set(reports) == {".json", ".md", ".png"}
    assert reports[".png"].read_bytes().startswith(b"\x89PNG")
    text = reports[".md"].read_text()
    assert "| limit |" in text and "| peer |" in text and "| runbatch |" in text and "| server |" in text
    report = json.loads(reports[".json"].read_text())
    assert report
