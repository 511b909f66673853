"""Release the shared memory and named semaphores that vLLM's engine processes leave behind.

The engine core and its worker make POSIX shared memory (their message queues) and named
semaphores, registered with Python's resource_tracker, which they share with this process; they
free them only when they exit cleanly. A core that does not exit within the shutdown timeout is
SIGKILLed by vLLM, and the tracker then warns "There appear to be N leaked shared_memory objects"
as batchd exits. So the names are read from the engine processes' memory maps before shutdown,
and whatever is still there afterwards is removed here and struck off the tracker's list."""

from __future__ import annotations

import contextlib
import logging
from dataclasses import dataclass, field
from multiprocessing import resource_tracker
from pathlib import Path

import psutil

logger = logging.getLogger(__name__)

SHM_DIR = Path("/dev/shm")
# The names Python's multiprocessing gives (the only ones its tracker lists): SharedMemory
# "/psm_…"; semaphores "/mp-…", stored by glibc as /dev/shm/sem.mp-…
MEMORY_PREFIX = "psm_"
SEMAPHORE_PREFIX = "sem.mp-"


@dataclass
class SharedObjects:
    """Names as the resource tracker knows them ("/psm_…", "/mp-…")."""

    memory: set[str] = field(default_factory=set)
    semaphores: set[str] = field(default_factory=set)


def engine_shared_objects(processes: list[psutil.Process]) -> SharedObjects:
    """What the engine `processes` have mapped from /dev/shm."""
    found = SharedObjects()
    for proc in processes:
        with contextlib.suppress(psutil.Error):
            for mapping in proc.memory_maps(grouped=True):
                path = Path(mapping.path.removesuffix(" (deleted)"))
                if path.parent != SHM_DIR:
                    continue
                if path.name.startswith(SEMAPHORE_PREFIX):
                    found.semaphores.add("/" + path.name.removeprefix("sem."))
                elif path.name.startswith(MEMORY_PREFIX):
                    found.memory.add("/" + path.name)
    return found


def release_leftovers(objects: SharedObjects) -> None:
    """Remove those of `objects` still present once the engine processes are gone (on Linux,
    shm_unlink and sem_unlink remove these files). Only names still on disk are struck off the
    tracker: never unlinked, they are still on its list (striking an unknown name makes it print
    a traceback)."""
    leftovers = [(SHM_DIR / name.lstrip("/"), name, "shared_memory") for name in objects.memory]
    leftovers += [(SHM_DIR / ("sem." + name.lstrip("/")), name, "semaphore") for name in objects.semaphores]
    released = 0
    for path, name, kind in leftovers:
        try:
            path.unlink()
        except FileNotFoundError:
            continue
        resource_tracker.unregister(name, kind)
        released += 1
    if released:
        logger.info("Released %d shared-memory objects the engine processes left behind", released)
