"""Ratios between systems and the pass/fail targets batchd is held to.

Targets (throughput is lines per second of processing time):
- W1, W2: each batchd system >= 0.95x the limit and >= 1.0x the peer;
- W3: each batchd system >= 1.2x the peer;
- W4: each batchd system's peak RSS at the largest size <= 1.2x its peak at the smallest.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass

from bench.result import SystemRun
from bench.systems import BATCHD_SYSTEMS


@dataclass(frozen=True)
class Target:
    system: str
    check: str
    value: float | None
    threshold: float
    # "at least" or "at most"
    direction: str

    @property
    def passed(self) -> bool | None:
        """None when the value is unknown (system unavailable or failed)."""
        if self.value is None:
            return None
        return self.value >= self.threshold if self.direction == "at least" else self.value <= self.threshold

    def to_dict(self) -> dict:
        return {**asdict(self), "value": None if self.value is None else round(self.value, 3), "passed": self.passed}


def ratio(a: float | None, b: float | None) -> float | None:
    return a / b if a is not None and b else None


def throughput_ratios(results: dict[str, SystemRun]) -> dict[str, dict[str, float | None]]:
    """Each system's lines/s and peak RSS relative to the limit and to the peer."""
    limit, peer = results.get("limit"), results.get("peer")
    out = {}
    for name, run in results.items():
        out[name] = {
            "lines_per_s_vs_limit": ratio(run.lines_per_s, limit and limit.lines_per_s),
            "lines_per_s_vs_peer": ratio(run.lines_per_s, peer and peer.lines_per_s),
            "peak_rss_vs_limit": ratio(run.peak_rss_mb if run.succeeded else None, limit and limit.peak_rss_mb),
            "peak_rss_vs_peer": ratio(run.peak_rss_mb if run.succeeded else None, peer and peer.peak_rss_mb),
        }
    return out


def rss_growth(small: SystemRun, large: SystemRun) -> float | None:
    """Peak RSS at the large size over the small size (None unless both succeeded)."""
    if not (small.succeeded and large.succeeded):
        return None
    return ratio(large.peak_rss_mb, small.peak_rss_mb)


def targets(workload_id: str, runs: list[dict[str, SystemRun]]) -> list[Target]:
    """The targets of ``workload_id`` for the batchd systems present in ``runs``."""
    present = [name for name in BATCHD_SYSTEMS if name in runs[0]]
    if workload_id == "W4":
        return [
            Target(
                name,
                "peak RSS, largest size / smallest size",
                rss_growth(runs[0][name], runs[-1][name]),
                1.2,
                "at most",
            )
            for name in present
        ]
    ratios = throughput_ratios(runs[0])
    checks = {
        "W1": [("lines/s vs limit", "lines_per_s_vs_limit", 0.95), ("lines/s vs peer", "lines_per_s_vs_peer", 1.0)],
        "W2": [("lines/s vs limit", "lines_per_s_vs_limit", 0.95), ("lines/s vs peer", "lines_per_s_vs_peer", 1.0)],
        "W3": [("lines/s vs peer", "lines_per_s_vs_peer", 1.2)],
    }[workload_id]
    return [
        Target(name, check, ratios[name][key], threshold, "at least")
        for name in present
        for check, key, threshold in checks
    ]
