"""The metrics table of docs/observability.md is exactly what app/core/metrics.py exports
(scripts/metrics_table.py generates it; a stale page fails here)."""

from __future__ import annotations

import importlib.util
import re
import subprocess
import sys
from pathlib import Path

from prometheus_client import generate_latest

from app.core import metrics

ROOT = Path(__file__).resolve().parents[2]


def _generator():
    spec = importlib.util.spec_from_file_location("metrics_table", ROOT / "scripts" / "metrics_table.py")
    assert spec and spec.loader
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_the_page_table_is_the_generated_one() -> None:
    generator = _generator()
    page = (ROOT / "docs" / "observability.md").read_text()
    assert generator.page_table(page) == generator.table(), "stale: run python scripts/metrics_table.py"


def test_every_exported_metric_has_a_row_and_every_note_a_metric() -> None:
    generator = _generator()
    rows = {name for name, *_ in generator.metrics()}
    exposed = set(re.findall(r"^# TYPE (batchd_\w+) ", generate_latest(metrics.REGISTRY).decode(), re.M))
    # A counter's TYPE line names it without `_total` (and a label-less one has a `_created`
    # gauge of its own); every exported family has its row.
    exposed = {n for n in exposed if not n.endswith("_created")}
    assert {n if n + "_total" not in rows else n + "_total" for n in exposed} <= rows
    assert "batchd_batches_at_risk" in rows and "batchd_single_request_seconds" in rows
    assert set(generator.NOTES) <= {name.removesuffix("_total") for name in rows}


def test_the_check_fails_on_a_stale_page(tmp_path) -> None:
    generator = _generator()
    page = (ROOT / "docs" / "observability.md").read_text()
    stale = page.replace("| `batchd_batches_at_risk` |", "| `batchd_at_risk` |")
    assert stale != page
    assert generator.page_table(stale) != generator.table()
    copy = tmp_path / "observability.md"
    copy.write_text(stale)
    assert generator.write(copy) is True and generator.page_table(copy.read_text()) == generator.table()
    result = subprocess.run(
        [sys.executable, str(ROOT / "scripts" / "metrics_table.py"), "--check"],
        capture_output=True,
        text=True,
        timeout=120,
        cwd=ROOT,
    )
    assert result.returncode == 0, result.stdout + result.stderr
