"""Run the engine processes below the API: a request's wake-up preempts inference at once.

On CPU inference the engines keep every CPU busy, and the kernel's fair scheduler makes a
waking API thread wait for the engines' slices: under load that put `batches.retrieve` p99 at
0.5-0.9 s (bench/results/2026-11-24-load.md).
Raising the niceness of every thread of the engine-core and worker processes keeps their share
when the API is idle and lets the API in first when it is not. Threads the engines start later
inherit it. Niceness is per thread on Linux, so each thread is set.

``BATCHD_ENGINE_NICENESS``: 0-19 added to the engines' niceness (default 10 on CPU inference, 0
on GPU hosts, where a starved engine core would leave the GPU waiting; 0 turns it off).
"""

from __future__ import annotations

import logging
import os

from app.engine.errors import ModelConfigError
from app.engine.local.orphans import engine_processes
from app.engine.local.platform import engine_runs_on_cpu
from app.engine.local.threads import apply_to_threads

logger = logging.getLogger(__name__)

SETTING = "BATCHD_ENGINE_NICENESS"
DEFAULT = 10


def lower_engine_priority() -> None:
    """Renice every thread of this process's descendants (the engine cores and their workers)
    to this process's niceness plus the configured amount. Call once all engines have started."""
    raw = os.environ.get(SETTING, "").strip() or str(DEFAULT if engine_runs_on_cpu() else 0)
    try:
        niceness = int(raw)
    except ValueError:
        niceness = -1
    if not 0 <= niceness <= 19:
        raise ModelConfigError(f"{SETTING}={raw!r}: expected a whole number from 0 to 19.")
    if niceness == 0:
        return
    target = min(19, os.getpriority(os.PRIO_PROCESS, 0) + niceness)
    # Only vLLM's processes: a test process may also have `batchd serve` children.
    apply_to_threads(engine_processes(), lambda thread_id: os.setpriority(os.PRIO_PROCESS, thread_id, target))
    logger.info("Engine processes reniced by %d (below the API).", niceness)
