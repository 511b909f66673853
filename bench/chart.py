"""A workload's PNG chart, drawn from its report with matplotlib's Agg backend: throughput
(annotated with the ratio to the limit and to the peer) and peak memory per system; for a
workload with several sizes, both per size side by side."""

from __future__ import annotations

from pathlib import Path


def require_matplotlib() -> None:
    """Fail early, before any benchmark runs, when charts cannot be drawn."""
    try:
        import matplotlib  # noqa: F401
    except ImportError as exc:
        raise SystemExit("bench needs matplotlib for its charts: pip install -e '.[bench]'") from exc


def write_chart(report: dict, path: Path) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    runs = report["runs"]
    systems = list(runs[0]["systems"])
    fig, (ax_speed, ax_rss) = plt.subplots(1, 2, figsize=(12, 4.8))
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
    plt.close(fig)


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
