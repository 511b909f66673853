"""The benchmark harness end to end at a tiny scale, so it cannot rot: every system runs W1 on
the same generated input and the JSON, Markdown and PNG reports are written."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).parents[2]


def test_bench_harness_smoke(tmp_path):
    done = subprocess.run(
        [sys.executable, "-m", "bench", "--workloads", "W1", "--scale", "0.01", "--enforce-eager", "--results-dir", str(tmp_path)],
        cwd=ROOT, capture_output=True, text=True, timeout=1200, check=False,
    )
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
    reports = {p.suffix: p for p in tmp_path.iterdir()}
    assert set(reports) == {".json", ".md", ".png"}
    assert reports[".png"].read_bytes().startswith(b"\x89PNG")
    text = reports[".md"].read_text()
    assert "| limit |" in text and "| peer |" in text and "| runbatch |" in text and "| server |" in text
    report = json.loads(reports[".json"].read_text())
    assert report
