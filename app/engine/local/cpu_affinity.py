"""Keep the front-end and engine-core processes off the CPUs vLLM's CPU workers are bound to.

On the CPU platform vLLM binds each worker's OpenMP threads to its own CPUs and leaves the rest
("reserved") for the other processes, but it does not pin those: the API process and the engine
core (which busy-polls while the worker computes) float over every CPU, the workers' included.
On 2 CPUs batchd's front-end (templating, tokenising, response objects: 0.2-0.3 of a CPU in W1)
then spills onto the worker's CPU and the worker gets 0.82-0.98 of it instead of all of it
(bench/README.md). Pinning this process and the engine cores to the CPUs no worker is bound to
gives the workers their CPUs to themselves.

``BATCHD_ENGINE_CPU_AFFINITY``: ``auto`` (default: pin when the workers leave CPUs free) or
``off``.
"""

from __future__ import annotations

import logging
import os

import psutil

from app.engine.errors import ModelConfigError
from app.engine.local.orphans import process_title
from app.engine.local.platform import engine_runs_on_cpu
from app.engine.local.threads import apply_to_threads

logger = logging.getLogger(__name__)

SETTING = "BATCHD_ENGINE_CPU_AFFINITY"
WORKER_TITLE = "VLLM::Worker"


def pin_off_worker_cpus() -> set[int] | None:
    """Pin every thread of this process and of its non-worker descendants to the CPUs no
    worker descendant is bound to. Call once all engines have started (engines spawned later
    would inherit the narrowed set), and :func:`unpin` after they stop. Returns this process's
    CPUs before pinning, or None when nothing changed."""
    setting = os.environ.get(SETTING, "auto").strip() or "auto"
    if setting not in ("auto", "off"):
        raise ModelConfigError(f"{SETTING}={setting!r}: expected auto or off.")
    if setting == "off" or not engine_runs_on_cpu() or not hasattr(os, "sched_setaffinity"):
        return None
    me = psutil.Process()
    descendants = me.children(recursive=True)
    workers = [proc for proc in descendants if process_title(proc).startswith(WORKER_TITLE)]
    allowed = os.sched_getaffinity(0)
    worker_cpus = set().union(*(_affinity(proc) for proc in workers))
    free = allowed - worker_cpus
    if not worker_cpus or not free:
        return None  # no CPU worker, or the workers use every CPU (nothing left to move to)
    _set_affinity([me, *(proc for proc in descendants if proc not in workers)], free)
    logger.info(
        "Front-end and engine-core processes pinned to CPUs %s; workers keep %s.", sorted(free), sorted(worker_cpus)
    )
    return allowed


def unpin(cpus: set[int]) -> None:
    """Give this process back the CPUs :func:`pin_off_worker_cpus` returned, so engines it
    starts later (tests start several registries in one process) can bind to any of them."""
    _set_affinity([psutil.Process()], cpus)


def _set_affinity(processes: list[psutil.Process], cpus: set[int]) -> None:
    apply_to_threads(processes, lambda thread_id: os.sched_setaffinity(thread_id, cpus))


def _affinity(proc: psutil.Process) -> set[int]:
    try:
        return set(proc.cpu_affinity())
    except psutil.Error:
        return set()
