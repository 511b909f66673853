"""What every system is given and must do: run one input file with the workload's engine
settings in its own processes and return a :class:`~bench.result.SystemRun`."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Protocol

from bench.engine import EngineSettings
from bench.result import SystemRun


@dataclass(frozen=True)
class RunSpec:
    """One measured run: the input, its engine, and a fresh directory for the system's files."""

    engine: EngineSettings
    endpoint: str
    input_path: Path
    lines: int
    warmup_path: Path
    work_dir: Path
    timeout: float


class System(Protocol):
    name: str
    # One line for the report: what the system is.
    description: str
    # One line for the report: how its processing time is measured.
    timing: str

    def unavailable_reason(self) -> str | None:
        """Why this system cannot run on this install, or None."""

    def run(self, spec: RunSpec) -> SystemRun:
        """Run ``spec`` to completion; failures are returned as a run with ``error`` set."""
