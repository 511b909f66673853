"""W6-lanes in the one harness: background responses and flex calls beside two teams' batches
(bench/workloads/w6/lanes.py), one server, rounds of an alone and a beside window, and its report.

    .venv/bin/python -m bench --workloads W6-lanes [--rounds 3] [--scale 1.0]
"""

from __future__ import annotations

from typing import ClassVar

from bench.report import Document, Report, checks_table
from bench.workload import Context, NoParams
from bench.workloads.w6.lanes import GAP_S, POLL_S, lanes_run


class W6Lanes:
    id, slug, title = "W6-lanes", "W6-lanes", "Background responses and flex calls beside batches"
    # Rounds are windows on one server (an alone and a beside window each), not fresh servers.
    default_rounds = 3
    Params: ClassVar[type[NoParams]] = NoParams

    def run(self, context: Context) -> Report:
        data = lanes_run(context.work_dir / "W6-lanes", context.scale, context.rounds, context.log)
        failed = bool(data["batches_ended_early"] or data["failures"])
        return Report(self.id, self.slug, self.title, data, render, failed=failed)


def render(doc: Document) -> str:
    rows = [
        f"| {lane} | {s['requests']} | {s['p50_s']} | {s['p95_s']} | {s['max_s']} |"
        for lane, s in (("background response", doc["background"]), ("flex chat call", doc["flex"]))
    ]
    windows = [f"| {w['round']} | {w['kind']} | {w['lines_per_second']} |" for w in doc["windows"]]
    return "\n".join(
        [
            "One `batchd serve` (SQLite, every setting at its default) with the built-in tiny chat model in "
            f"process on CPU; {doc['batches']} {doc['batch_lines']}-line 24h chat batches of two teams run throughout "
            "(a run where one ended before the last window fails). Rounds of two "
            f"{doc['window_seconds']:g} s windows, in alternating order: **alone** (only the batches) and **beside** "
            "(a third team sends background responses, `max_output_tokens` 16, and flex chat calls, `max_tokens` 8, "
            f"each lane one request after another with {GAP_S:g} s between). A background response's latency is from "
            f"its create call to an end seen by polling every {POLL_S:g} s; a flex call's is the HTTP call. "
            f"Engine start-up {doc['startup_seconds']} s.",
            "",
            "## Goals",
            "",
            *checks_table(doc["checks"]),
            "",
            "## Single requests, beside the batches",
            "",
            "| lane | requests | p50 (s) | p95 (s) | max (s) |",
            "|---|---|---|---|---|",
            *rows,
            "",
            "## The batches' throughput (completed lines per second over each window)",
            "",
            "| round | window | lines/s |",
            "|---|---|---|",
            *windows,
            "",
            f"Same-round ratios beside / alone: {', '.join(f'{r:.2f}' for r in doc['ratios'])}."
            + (f" Not completed: {doc['failures']}." if doc["failures"] else ""),
            "",
        ]
    )
