"""W6-quote in the one harness: quotes against the batches they quoted (bench/workloads/w6/quote.py),
a fresh server each round, and its report.

    .venv/bin/python -m bench --workloads W6-quote [--rounds 3] [--scale 1.0]
"""

from __future__ import annotations

import time
from typing import ClassVar

from bench.report import Document, Report, checks_table
from bench.workload import Context, NoParams
from bench.workloads.w6.quote import RATIO_HIGH, RATIO_LOW, SPACING_S, quote_round
from bench.workloads.w6.report import median_lines

SCENARIO = "quote"


class W6Quote:
    id, slug, title = "W6-quote", "W6-quote", "A batch's quote against its run (projected vs actual finish)"
    # One round by default; with --rounds N the goal is judged on the median of N rounds' medians.
    default_rounds = 1
    Params: ClassVar[type[NoParams]] = NoParams

    def run(self, context: Context) -> Report:
        began = time.monotonic()
        rounds = [
            {SCENARIO: quote_round(context.work_dir / "W6-quote" / f"round-{n}", context.scale, context.log)}
            for n in range(1, context.rounds + 1)
        ]
        data = {"seconds": round(time.monotonic() - began, 1), "rounds": rounds}
        failed = any(r[SCENARIO]["not_completed"] for r in rounds)
        return Report(self.id, self.slug, self.title, data, render, failed=failed)


def render(doc: Document) -> str:
    rounds = doc["rounds"]
    out = [
        "One `batchd serve` (SQLite, every setting at its default) with the built-in tiny chat model "
        "in process on CPU. Two teams' 24h batches run (the background below); then four batches are each "
        "created right after a quote (`POST /v1/batches/estimate`) of the same body, the next one "
        f"{SPACING_S:g} s after the batch created before it had its first lines done. Times are seconds after the "
        "batch's create call was sent (the API's times are whole seconds); ratio = actual / projected duration from there to completed "
        f"(goal on the median: {RATIO_LOW}x-{RATIO_HIGH}x). {doc['seconds']:.0f} s in all.",
        "",
    ]
    if len(rounds) > 1:
        out += median_lines(rounds)
    for number, results in enumerate(rounds, 1):
        out += [f"# Round {number}" if len(rounds) > 1 else "## Goal", "", *_round_lines(results[SCENARIO])]
    return "\n".join(out)


def _round_lines(r: dict) -> list[str]:
    background = ", ".join(f"{b['batch']} {b['lines']} lines ({b['status']})" for b in r["background"])
    out = [
        *checks_table(r["checks"]),
        "",
        f"Engine start-up {r['startup_seconds']} s; background: {background}; {r['seconds']} s from the first "
        "create to the last completion.",
        "",
        "| batch | where | lines | window | quoted lines/s | projected start | in progress | first lines done "
        "| projected finish | completed | ratio | quotes asked |",
        "|---|---|---|---|---|---|---|---|---|---|---|---|",
    ]
    for b in r["batches"]:
        cells = [
            b["batch"],
            b["position"],
            b["lines"],
            b["window"],
            None if b["quoted_lines_per_second"] is None else round(b["quoted_lines_per_second"], 1),
            b["projected_start_s"],
            b["in_progress_s"],
            b["first_done_s"],
            b["projected_finish_s"],
            b["completed_s"],
            "-" if b["ratio"] is None else f"{b['ratio']:.2f}",
            b["quotes_asked"],
        ]
        out.append("| " + " | ".join("-" if c is None else str(c) for c in cells) + " |")
    return out + [""]
