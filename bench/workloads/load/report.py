"""The load report: a latency table per backend (p50/p95/p99 per operation) and a chart."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from bench.report import Check, Document, checks_table, plt

RETRIEVE_P99_TARGET_MS = 250.0
SPLIT_LAYOUT = (
    "Split layout: the clients talk to a `batchd serve --api-only` replica (no engines, no worker); "
    "a full replica at niceness {} runs the batches on the same database and data dir. "
    "Engine processes below include that replica's own process."
)
UNNICED_LAYOUT = (
    "Engines unniced: one `batchd serve` with its engine processes at the API's niceness "
    "(`BATCHD_ENGINE_NICENESS=0`, as before 2026-11-24); `one` below is the default (engines at +10)."
)
LAYOUT_NOTES = {"split": SPLIT_LAYOUT, "one-unniced": UNNICED_LAYOUT}


def _ms(value: float | None) -> str:
    return "—" if value is None else f"{value:,.0f}" if value >= 100 else f"{value:.1f}"


def _cpu_line(cpu: dict[str, float] | None) -> str:
    if not cpu:
        return ""
    other = cpu["machine"] - cpu["api"] - cpu["engines"] - cpu["clients"]
    return (
        f"CPU seconds during the load ({cpu['available']:.0f} available on all CPUs): API process "
        f"{cpu['api']:.0f}, engine processes {cpu['engines']:.0f}, load clients {cpu['clients']:.0f}, "
        f"everything else on the machine (other users' tests) {other:.0f}; busy in total {cpu['machine']:.0f}."
    )


def _profile_lines(profile: dict[str, Any] | None) -> list[str]:
    if not profile:
        return []
    rows = [
        f"API process sampled with py-spy ({profile['samples']} samples while busy, 50 per second "
        "over half the run); where its samples end, by file:",
        "",
        "| file | share of samples |",
        "|---|---:|",
    ]
    rows += [f"| `{name}` | {share:.1f}% |" for name, share in profile["files"]]
    return rows + [""]


def retrieve_p99_check(run: Document) -> Check:
    """The target: `batches.retrieve`'s p99 while the engine is saturated."""
    p99 = run["operations"].get("batches.retrieve", {}).get("p99")
    return Check.at_most(
        "p99 of `batches.retrieve` while the engine is saturated (ms)",
        p99,
        RETRIEVE_P99_TARGET_MS,
        goal=f"<= {RETRIEVE_P99_TARGET_MS:.0f} ms",
        value=_ms(p99),
    )


def render(report: Document) -> str:
    c = report["config"]
    out = [
        f"{c['clients']} concurrent clients (official `openai` async client, one connection pool each) for "
        f"{c['duration_s']:.0f} s against `batchd serve` with the built-in models, each client looping "
        f"over uploads, chunked uploads, lists, retrieves, downloads, batch creates, retrieves and cancels "
        f"with a random pause of 0-{2 * c['think_s']:.2f} s between calls; batches of {c['lines_per_batch']} "
        f"chat lines x {c['max_tokens']} tokens keep the engine saturated. Clients run on the same machine.",
        "",
    ]
    for run in report["runs"]:
        v = run["verify"]
        out += [
            f"## {run['backend']}",
            "",
            *(
                [LAYOUT_NOTES[run["layout"]].format(run["worker_niceness"]), ""]
                if run.get("layout") in LAYOUT_NOTES
                else []
            ),
            f"Load average (1/5/15 min) before: {run['loadavg_before']}, after: {run['loadavg_after']}.",
            "",
            _cpu_line(run.get("cpu_seconds")),
            "",
            *_profile_lines(run.get("api_profile")),
            "| operation | calls | p50 ms | p95 ms | p99 ms | max ms | 503 retried |",
            "|---|---:|---:|---:|---:|---:|---:|",
        ]
        for op, p in run["operations"].items():
            out.append(
                f"| {op} | {p['n']} | {_ms(p['p50'])} | {_ms(p['p95'])} | {_ms(p['p99'])} | {_ms(p['max'])} "
                f"| {run['retried_503'].get(op, 0)} |"
            )
        probe = run.get("probe_retrieve")
        if probe and probe["n"]:
            out.append(
                f"| batches.retrieve, probe (one client, own process, 20 calls/s) | {probe['n']} "
                f"| {_ms(probe['p50'])} | {_ms(probe['p95'])} | {_ms(probe['p99'])} | {_ms(probe['max'])} | 0 |"
            )
        out += [
            "",
            f"- Errors (anything but a retried 503 + Retry-After): **{len(run['errors'])}**"
            + ("" if not run["errors"] else ": " + "; ".join(run["errors"][:5])),
            f"- Cancels that raced a batch's own completion (documented 409): {run['cancel_conflicts']}",
            f"- Nothing lost: {v['batches']} batches all ended ({v['batches_by_status']}), drained "
            f"{v['drain_s']} s after the load stopped; {v['files_checked']} files round-tripped; "
            f"problems: **{len(v['problems'])}**" + ("" if not v["problems"] else ": " + "; ".join(v["problems"][:5])),
            "",
            *checks_table(run["checks"]),
            "",
        ]
    return "\n".join(out)


def write_chart(report: Document, path: Path) -> None:
    pyplot = plt()
    runs = report["runs"]
    cols = min(3, len(runs))  # one row per backend when three layouts ran
    rows = -(-len(runs) // cols)
    fig, axes = pyplot.subplots(rows, cols, figsize=(7 * cols, 4.8 * rows), squeeze=False)
    for ax in axes.flat[len(runs) :]:
        ax.set_visible(False)
    for ax, run in zip(axes.flat, runs, strict=False):
        ops = list(run["operations"])
        width = 0.27
        for k, (key, label) in enumerate((("p50", "p50"), ("p95", "p95"), ("p99", "p99"))):
            values = [run["operations"][op][key] or 0 for op in ops]
            ax.bar([i + (k - 1) * width for i in range(len(ops))], values, width, label=label)
        ax.axhline(
            RETRIEVE_P99_TARGET_MS,
            color="red",
            linestyle="--",
            linewidth=1,
            label=f"{RETRIEVE_P99_TARGET_MS:.0f} ms (retrieve p99 target)",
        )
        ax.set_yscale("log")
        ax.set_xticks(range(len(ops)))
        ax.set_xticklabels(ops, rotation=35, ha="right", fontsize=8)
        ax.set_ylabel("latency, ms (log)")
        ax.set_title(
            f"{run['backend']}: {sum(p['n'] for p in run['operations'].values()):,} calls, {len(run['errors'])} errors"
        )
        ax.legend(fontsize=7)
    c = report["config"]
    fig.suptitle(f"batchd load test {report['date']}: {c['clients']} clients x {c['duration_s']:.0f} s")
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    pyplot.close(fig)
