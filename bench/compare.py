"""Ratios between systems (medians of same-round ratios, for every workload) and the pass/fail
targets of the side-by-side workloads W1–W4 (as :class:`bench.report.Check` s).

Targets (throughput is lines per second of processing time), judged on every input size:
- W1, W2: each batchd system >= 0.95x the limit and >= 1.0x the peer, and its main process's
  CPU per line (the front end: everything but vLLM's engine core and workers) <= 0.8x the peer's;
- W3: each batchd system >= 1.2x the peer;
- W4: each batchd system's peak RSS at the largest size <= 1.2x its peak at the smallest.

Every ratio between two systems is the median of their same-round ratios: rounds run the systems
interleaved, so a round's pair shares the host's speed of the moment, which drifts between rounds
(a ratio of two medians would mix rounds).
"""

from __future__ import annotations

import statistics
from collections.abc import Sequence

from bench.report import Check
from bench.result import SystemRun
from bench.systems import BATCHD_SYSTEMS


def ratio(a: float | None, b: float | None) -> float | None:
    return a / b if a is not None and b else None


def same_round_ratios(mine: Sequence[float | None], theirs: Sequence[float | None]) -> list[float | None]:
    """Round by round, ``mine`` over ``theirs`` (None where either is missing)."""
    return [ratio(a, b) for a, b in zip(mine, theirs, strict=False)]


def median_same_round_ratio(mine: Sequence[float | None], theirs: Sequence[float | None]) -> float | None:
    """The median of the same-round ratios; None unless both have a figure in every round. Every
    workload that compares two things over rounds (systems, layers, the bare client) uses this."""
    pairs = same_round_ratios(mine, theirs)
    if not pairs or len(mine) != len(theirs) or any(p is None for p in pairs):
        return None
    return statistics.median(p for p in pairs if p is not None)


def paired_ratio(run: SystemRun, base: SystemRun | None, figure: str) -> float | None:
    """The median over rounds of `run`'s `figure` over `base`'s in the same round; None unless
    both have it in every round."""
    if base is None or not (run.succeeded and base.succeeded):
        return None
    return median_same_round_ratio(run.per_round(figure), base.per_round(figure))


def throughput_ratios(results: dict[str, SystemRun]) -> dict[str, dict[str, float | None]]:
    """Each system's lines/s, peak RSS and main-process CPU per line relative to the limit and
    to the peer (medians of same-round ratios)."""
    limit, peer = results.get("limit"), results.get("peer")
    out = {}
    for name, run in results.items():
        out[name] = {
            "lines_per_s_vs_limit": paired_ratio(run, limit, "lines_per_s"),
            "lines_per_s_vs_peer": paired_ratio(run, peer, "lines_per_s"),
            "peak_rss_vs_limit": paired_ratio(run, limit, "peak_rss_mb"),
            "peak_rss_vs_peer": paired_ratio(run, peer, "peak_rss_mb"),
            "main_cpu_vs_peer": paired_ratio(run, peer, "main_cpu_ms_per_line"),
        }
    return out


def rss_growth(small: SystemRun, large: SystemRun) -> float | None:
    """Peak RSS at the large size over the small size (None unless both succeeded)."""
    if not (small.succeeded and large.succeeded):
        return None
    return ratio(large.peak_rss_mb, small.peak_rss_mb)


def targets(workload_id: str, runs: list[dict[str, SystemRun]]) -> list[Check]:
    """The targets of ``workload_id`` for the batchd systems present in ``runs`` (a check is
    not measured, its result n/a, when a system did not run)."""
    present = [name for name in BATCHD_SYSTEMS if name in runs[0]]
    if workload_id == "W4":
        return [
            _target(
                name,
                "peak RSS, largest size / smallest size",
                rss_growth(runs[0][name], runs[-1][name]),
                1.2,
                "at most",
            )
            for name in present
        ]
    in_process = [
        ("lines/s vs limit", "lines_per_s_vs_limit", 0.95, "at least"),
        ("lines/s vs peer", "lines_per_s_vs_peer", 1.0, "at least"),
        ("main-process CPU per line vs peer", "main_cpu_vs_peer", 0.8, "at most"),
    ]
    checks = {"W1": in_process, "W2": in_process, "W3": [("lines/s vs peer", "lines_per_s_vs_peer", 1.2, "at least")]}
    found = []
    for systems in runs:
        ratios = throughput_ratios(systems)
        size = f" ({_lines(systems)} lines)" if len(runs) > 1 else ""
        found += [
            _target(name, check + size, ratios[name][key], threshold, direction)
            for name in present
            for check, key, threshold, direction in checks[workload_id]
        ]
    return found


def _target(system: str, check: str, value: float | None, threshold: float, direction: str) -> Check:
    """A system's ratio against its threshold ("at least" or "at most")."""
    state = Check.at_least if direction == "at least" else Check.at_most
    measure = None if value is None else round(value, 3)
    shown = "–" if value is None else f"{value:.2f}×"
    return state(f"{system}: {check}", measure, threshold, goal=f"{direction} {threshold}×", value=shown)


def _lines(systems: dict[str, SystemRun]) -> str:
    return f"{next(iter(systems.values())).lines:,}"
