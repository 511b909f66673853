"""What one system's run of one input produced: counts, timings, memory, and the derived
throughputs. Timings are seconds; ``processing_s`` excludes engine start-up for every system
(``timing`` says how it was measured)."""

from __future__ import annotations

from dataclasses import asdict, dataclass, field
from typing import Any

from bench.outputs import OutputStats


@dataclass
class SystemRun:
    system: str
    lines: int
    available: bool = True
    error: str | None = None
    ok: int = 0
    failed: int = 0
    prompt_tokens: int = 0
    output_tokens: int = 0
    # Spawn until results are on disk (for the server: spawn, warm-up, then the batch).
    wall_s: float | None = None
    # The batch itself, without engine start (server: batch created -> completed).
    processing_s: float | None = None
    # Spawn until the engine is ready to take the batch.
    startup_s: float | None = None
    # Server only: upload start -> result files downloaded.
    end_to_end_s: float | None = None
    timing: str = ""
    rss: dict[str, Any] = field(default_factory=dict)
    # Every round's figures when the input ran more than once (this run is the median one):
    # ratios between systems are taken round by round from these (bench/compare.py).
    round_lines_per_s: list[float | None] = field(default_factory=list)
    round_peak_rss_mb: list[float | None] = field(default_factory=list)
    round_main_cpu_ms_per_line: list[float | None] = field(default_factory=list)

    @classmethod
    def unavailable(cls, system: str, lines: int, reason: str) -> SystemRun:
        return cls(system, lines, available=False, error=reason)

    @classmethod
    def failed_run(cls, system: str, lines: int, reason: str) -> SystemRun:
        return cls(system, lines, error=reason)

    @property
    def succeeded(self) -> bool:
        return self.available and self.error is None and bool(self.processing_s)

    def count(self, stats: OutputStats) -> None:
        """Take the line and token counts from a result-file scan."""
        self.ok, self.failed = stats.ok, stats.failed
        self.prompt_tokens, self.output_tokens = stats.prompt_tokens, stats.output_tokens

    @property
    def lines_per_s(self) -> float | None:
        return self.lines / self.processing_s if self.succeeded and self.processing_s else None

    @property
    def output_tokens_per_s(self) -> float | None:
        return (
            self.output_tokens / self.processing_s
            if self.succeeded and self.processing_s and self.output_tokens
            else None
        )

    @property
    def peak_rss_mb(self) -> float | None:
        return self.rss.get("peak_total_mb")

    @property
    def main_cpu_ms_per_line(self) -> float | None:
        """The main process's own CPU (not its engine processes') per line while processing."""
        cpu = self.rss.get("main_cpu_processing_s")
        return 1000 * cpu / self.lines if self.succeeded and cpu is not None and self.lines else None

    def per_round(self, figure: str) -> list[float | None]:
        """`figure` ("lines_per_s", "peak_rss_mb" or "main_cpu_ms_per_line") for every round; a
        single run is one round."""
        return getattr(self, f"round_{figure}") or [getattr(self, figure)]

    def to_dict(self) -> dict[str, Any]:
        out = asdict(self)
        out["lines_per_s"] = _round(self.lines_per_s)
        out["main_cpu_ms_per_line"] = _round(self.main_cpu_ms_per_line, 4)
        out["output_tokens_per_s"] = _round(self.output_tokens_per_s)
        for key in ("wall_s", "processing_s", "startup_s", "end_to_end_s"):
            out[key] = _round(out[key], 3)
        return out


def median_run(rounds: list[SystemRun]) -> SystemRun:
    """The round with the median throughput (the lower one of an even count), carrying every
    round's lines/s. Any failed round is the result: a flaky system must not hide behind its
    good rounds."""
    failed = [run for run in rounds if not run.succeeded]
    chosen = failed[0] if failed else sorted(rounds, key=lambda run: run.lines_per_s or 0.0)[(len(rounds) - 1) // 2]
    if len(rounds) > 1:
        chosen.round_lines_per_s = [_round(run.lines_per_s) for run in rounds]
        chosen.round_peak_rss_mb = [_round(run.peak_rss_mb, 1) for run in rounds]
        chosen.round_main_cpu_ms_per_line = [_round(run.main_cpu_ms_per_line, 4) for run in rounds]
    return chosen


def _round(value: float | None, digits: int = 2) -> float | None:
    return None if value is None else round(value, digits)
