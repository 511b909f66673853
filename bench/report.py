"""The bench's one report writer: every workload's report goes to
``<results>/<date>-<slug><label>.{json,md}`` (and ``.png`` when the workload draws a chart, and
``.samples.json.gz`` when it keeps raw samples: compressed, beside the JSON, not in it).

The JSON document is what was measured, with the same head for every workload: the workload, the
date, the command that reproduces it and the machine, whose ``batchd_commit`` is the commit
measured (bench/provenance.py reads it). The Markdown and the chart are drawn from that document
by the workload's own ``render`` and ``chart``; the Markdown's title and its provenance line (commit,
machine, load, command) are written here, once for all.

Every workload states its goals as :class:`Check` s, kept in the JSON as their ``to_dict()`` and
shown by :func:`checks_table`: the goal, the value measured, pass or fail."""

from __future__ import annotations

import datetime as dt
import gzip
import json
import os
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

Document = dict[str, Any]
# How a check judges its measure: ("max", bound), ("min", bound) or ("range", low, high).
Rule = tuple[Any, ...]


def passes(rule: Rule | list[Any], measure: float) -> bool:
    """Whether ``measure`` meets ``rule`` (bounds included)."""
    kind, *bounds = rule
    if kind == "max":
        return measure <= bounds[0]
    if kind == "min":
        return measure >= bounds[0]
    return bounds[0] <= measure <= bounds[1]


@dataclass(frozen=True)
class Check:
    """One goal of a workload and how a run did against it. ``measure`` is the number ``rule``
    judges (None: not measured, a system that did not run), so rounds can be judged on their
    median; ``value`` is what the report shows (``measure`` when None); ``goal`` the goal as shown;
    ``key`` names the check across rounds when ``check`` names a round's own worst case."""

    check: str
    measure: float | None
    rule: Rule
    goal: str
    value: object = None
    key: str = ""

    @classmethod
    def at_most(cls, check: str, measure: float | None, bound: float, **shown: Any) -> Check:
        return cls(check, measure, ("max", bound), shown.pop("goal", f"<= {bound}"), **shown)

    @classmethod
    def at_least(cls, check: str, measure: float | None, bound: float, **shown: Any) -> Check:
        return cls(check, measure, ("min", bound), shown.pop("goal", f">= {bound}"), **shown)

    @classmethod
    def within(cls, check: str, measure: float | None, low: float, high: float, **shown: Any) -> Check:
        return cls(check, measure, ("range", low, high), shown.pop("goal", f"{low}-{high}"), **shown)

    @property
    def passed(self) -> bool | None:
        return None if self.measure is None else passes(self.rule, self.measure)

    def to_dict(self) -> dict[str, Any]:
        return {
            "check": self.check,
            "key": self.key or self.check,
            "value": self.measure if self.value is None else self.value,
            "goal": self.goal,
            "measure": self.measure,
            "rule": list(self.rule),
            "pass": self.passed,
        }


def verdict(passed: bool | None) -> str:
    """A check's result as the reports show it."""
    return {True: "pass", False: "**FAIL**", None: "n/a"}[passed]


CHECKS_HEAD = ["| check | value | goal | result |", "|---|---|---|---|"]


def check_row(check: dict[str, Any], *lead: str) -> str:
    """One check (its ``to_dict()``) as a table row: ``lead`` cells first (a scenario, say), then
    check, value, goal, result."""
    cells = [*lead, check["check"], str(check["value"]), check["goal"], verdict(check["pass"])]
    return "| " + " | ".join(cells) + " |"


def checks_table(checks: list[dict[str, Any]]) -> list[str]:
    """The Markdown table of checks (their ``to_dict()``s): check, value, goal, result."""
    return [*CHECKS_HEAD, *(check_row(c) for c in checks)]


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
    # Raw samples (a value per second, per call): kept gzip-compressed in their own file, which
    # the JSON names ("samples_file"); render and chart see them in the document as keys.
    samples: Document = field(default_factory=dict)


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
    if report.samples:
        files[".samples.json.gz"] = stem.with_name(stem.name + ".samples.json.gz")
        with gzip.open(files[".samples.json.gz"], "wt") as out:
            json.dump(report.samples, out)
        doc["samples_file"] = files[".samples.json.gz"].name
    files[".json"].write_text(json.dumps(doc, indent=1) + "\n")
    whole = {**doc, **report.samples}
    if report.chart is not None:
        files[".png"] = stem.with_suffix(".png")
        report.chart(whole, files[".png"])
    chart_name = files[".png"].name if ".png" in files else None
    files[".md"].write_text(markdown(whole, report.render(whole), chart_name))
    return files


def read_document(path: Path) -> Document:
    """A report's JSON document with its raw samples, as render and chart saw it."""
    doc = json.loads(path.read_text())
    if name := doc.get("samples_file"):
        with gzip.open(path.with_name(name), "rt") as samples:
            doc.update(json.load(samples))
    return doc


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
