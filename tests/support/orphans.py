"""SIGKILL one process alone (not its group), as a supervisor that kills only the main pid
would, and check that the engine processes it started die with it."""

from __future__ import annotations

import os
import signal
import time

import psutil

# Each engine process gets its SIGKILL within a second of its parent's death, but the kernel's
# teardown of gigabytes on a loaded 2-core host has taken up to 9 s (and, once, more than 10 s
# for the worker, or for Python's resource tracker behind it, both gone soon after): without
# the engines' watchdog they would never go. CI (load average 60-90 from its own head starts)
# once saw a busy VLLM::Worker and the resource tracker still there at 30 s: they check for
# their parent between steps.
ORPHAN_DEADLINE_SECONDS = 60


def engine_descendants(pid: int) -> list[psutil.Process]:
    """The process's descendants, once its engine core (and, for a running engine, its worker)
    exist."""
    return psutil.Process(pid).children(recursive=True)


def _alive(proc: psutil.Process) -> bool:
    try:
        # A zombie holds no memory; it only waits for init to reap it.
        return proc.is_running() and proc.status() != psutil.STATUS_ZOMBIE
    except psutil.NoSuchProcess:
        return False


def _described(proc: psutil.Process, name: str) -> str:
    """The name, state and parent of a process still alive (why it did not go)."""
    try:
        return f"{name} ({proc.status()}, parent {proc.ppid()}, {' '.join(proc.cmdline())[:120]})"
    except psutil.Error:
        return name


def kill_alone_and_assert_no_orphans(pid: int) -> float:
    """SIGKILL `pid` only; assert every descendant it had is gone within ORPHAN_DEADLINE_SECONDS. Returns how long
    the last one took."""
    descendants = engine_descendants(pid)
    names = {p.pid: p.name() for p in descendants}
    assert any("EngineCore" in name for name in names.values()), f"no engine core among {names}"
    rss = sum(p.memory_info().rss for p in descendants if _alive(p))
    started = time.monotonic()
    os.kill(pid, signal.SIGKILL)
    while any(_alive(p) for p in descendants):
        if time.monotonic() - started > ORPHAN_DEADLINE_SECONDS:
            left = {p.pid: _described(p, names[p.pid]) for p in descendants if _alive(p)}
            for p in descendants:  # do not leave them to slow the rest of the suite
                try:
                    p.kill()
                except psutil.Error:
                    pass
            raise AssertionError(
                f"orphans after {ORPHAN_DEADLINE_SECONDS} s: {left} (holding {rss >> 20} MB when the parent died)"
            )
        time.sleep(0.1)
    return time.monotonic() - started
