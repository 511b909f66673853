"""The bench's one report writer: every workload's report goes to
``<results>/<date>-<slug><label>.{json,md}`` (and ``.png`` when the workload draws a chart).

The JSON document is what was measured, with the same head for every workload: the workload, the
date, the command that reproduces it and the machine, whose ``batchd_commit`` is the commit
measured (bench/provenance.py reads it). The Markdown and the chart are drawn from that document
by the workload's own ``render`` and ``chart``; the Markdown's title and its provenance line (commit,
machine, load, command) are written here, once for all."""

from __future__ import annotations

import datetime as dt
import json
import os
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

Document = dict[str, Any]


@dataclass
class Report:
    """What a workload's run produced. ``data`` joins the JSON document's head; ``render``
    returns the Markdown body and ``chart`` draws the PNG, both from the whole document."""

    workload_id: str
    slug: str
    title: str
    data: Document
    render: Callable[[Document], str]
    chart: Callable[[Document, Path], None] | None = None
    # A system or a check failed (not a missed target): the harness exits 1.
    failed: bool = False
    description: str = ""


def document(report: Report, machine: dict[str, Any], command: str, date: str | None = None) -> Document:
    """The JSON document: the common head, then the workload's data."""
    head: Document = {
        "workload": {"id": report.workload_id, "slug": report.slug, "title": report.title},
        "date": date or dt.date.today().isoformat(),
        "command": command,
        "machine": {**machine, "load_average_after": [round(x, 2) for x in os.getloadavg()]},
    }
    if report.description:
        head["workload"]["description"] = report.description
    if clash := set(head) & set(report.data):
        raise ValueError(f"a workload's data may not set the report's head: {sorted(clash)}")
    return {**head, **report.data}


def markdown(doc: Document, body: str, chart_name: str | None = None) -> str:
    """Title, provenance line, the workload's body and the chart's link."""
    w, m = doc["workload"], doc["machine"]
    parts = [
        f"# {w['id']} — {w['title']} ({doc['date']})",
        f"batchd commit measured: `{m.get('batchd_commit')}`. Machine: {m.get('cpus')} CPUs, "
        f"{m.get('memory_gib')} GiB; load average (1/5/15 min) {m.get('load_average')} before, "
        f"{m.get('load_average_after')} after; vLLM {m.get('vllm')}, Python {m.get('python')}. "
        f"Reproduce: `{doc['command']}`.",
    ]
    if chart_name:
        parts.append(f"![{w['title']}]({chart_name})")
    parts.append(body.strip())
    return "\n\n".join(parts) + "\n"


def write_report(
    report: Report, results_dir: Path, *, machine: dict[str, Any], command: str, label: str = ""
) -> dict[str, Path]:
    """Write the report's files; returns them by suffix."""
    doc = document(report, machine, command)
    results_dir.mkdir(parents=True, exist_ok=True)
    stem = results_dir / f"{doc['date']}-{report.slug}{label}"
    files = {".json": stem.with_suffix(".json"), ".md": stem.with_suffix(".md")}
    files[".json"].write_text(json.dumps(doc, indent=1) + "\n")
    if report.chart is not None:
        files[".png"] = stem.with_suffix(".png")
        report.chart(doc, files[".png"])
    chart_name = files[".png"].name if ".png" in files else None
    files[".md"].write_text(markdown(doc, report.render(doc), chart_name))
    return files


def require_matplotlib() -> None:
    """Fail early, before any benchmark runs, when charts cannot be drawn."""
    try:
        import matplotlib  # noqa: F401
    except ImportError as exc:
        raise SystemExit("bench needs matplotlib for its charts: pip install -e '.[bench]'") from exc


def plt() -> Any:
    """matplotlib's pyplot on the Agg backend (no display), for a workload's chart."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as pyplot

    return pyplot
