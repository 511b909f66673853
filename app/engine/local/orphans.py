"""Engine processes never outlive the process that started them.

vLLM's AsyncLLM spawns its EngineCore process with multiprocessing, and on CPU the core spawns
a Worker. The Worker watches the core (vLLM's death pipe), but nothing makes the core notice
that its parent died: a supervisor that SIGKILLs only `batchd serve` or `batchd run-batch`
(not the process group) would leave the core and its worker running, holding gigabytes.

So the core's entry point is wrapped: before vLLM's own code runs, a daemon thread polls the
parent pid, and once the parent is gone it SIGKILLs the core's descendants and then the core.
Polling, not PR_SET_PDEATHSIG: the death signal fires when the *thread* that forked the child
exits, and engines are started from a worker thread of the event loop's executor.
"""

from __future__ import annotations

import os
import signal
import threading
import time
from collections.abc import Collection

import psutil

# How often the engine core checks its parent: the tree gets its SIGKILL within a second of the
# parent's exit (the kernel's teardown of gigabytes can take seconds more on a loaded host).
POLL_SECONDS = 0.25

_original_run_engine_core = None


def guard_engine_processes() -> None:
    """Make every EngineCore started from now on watch its parent. Idempotent."""
    global _original_run_engine_core
    from app.engine.vllm_api import EngineCoreProc

    if _original_run_engine_core is not None:
        return
    _original_run_engine_core = EngineCoreProc.run_engine_core
    # Spawned children unpickle the target by its qualified name, so it must be this module's
    # top-level function; the child imports this module and finds the original on vLLM's class.
    EngineCoreProc.run_engine_core = staticmethod(run_engine_core_guarded)


def run_engine_core_guarded(*args, **kwargs):
    """vLLM's EngineCoreProc.run_engine_core, with a watchdog on the parent process."""
    start_parent_watchdog(os.getppid())
    from app.engine.vllm_api import EngineCoreProc

    original = _original_run_engine_core or EngineCoreProc.run_engine_core
    if original is run_engine_core_guarded:  # spawned child: the class was never patched here
        raise RuntimeError("the original run_engine_core is unknown")
    return original(*args, **kwargs)


def start_parent_watchdog(parent_pid: int) -> threading.Thread:
    """A daemon thread that kills this process tree once `parent_pid` is no longer our parent
    (a dead parent's children are re-parented to init or a subreaper)."""

    def watch() -> None:
        while os.getppid() == parent_pid:
            time.sleep(POLL_SECONDS)
        kill_own_tree()

    thread = threading.Thread(target=watch, name="batchd-parent-watchdog", daemon=True)
    thread.start()
    return thread


def kill_own_tree() -> None:
    """SIGKILL this process's descendants, then this process (no cleanup can be trusted once the
    front end is gone; the kernel releases the memory)."""
    try:
        children = psutil.Process().children(recursive=True)
    except psutil.Error:
        children = []
    for child in children:
        try:
            child.send_signal(signal.SIGKILL)
        except psutil.Error:
            pass
    os.kill(os.getpid(), signal.SIGKILL)


ENGINE_TITLE = "VLLM::"  # vLLM titles its processes VLLM::EngineCore and VLLM::Worker
# A worker notices its core's exit through vLLM's death pipe within about a second.
ENGINE_EXIT_WAIT_S = 10


def engine_processes(excluding: Collection[int] = ()) -> list[psutil.Process]:
    """The vLLM engine cores this process started (its children titled VLLM::, apart from the pids
    in `excluding`) and their descendants (the workers). Not any VLLM:: process below this one:
    a test process may also run `vllm serve`, whose engine core is a grandchild."""
    found: list[psutil.Process] = []
    try:
        children = psutil.Process().children()
    except psutil.Error:
        return found
    for proc in children:
        if proc.pid in excluding or not process_title(proc).startswith(ENGINE_TITLE):
            continue
        try:
            found += [proc, *proc.children(recursive=True)]
        except psutil.Error:
            pass  # it ended
    return found


def process_title(proc: psutil.Process) -> str:
    """The title vLLM gives its processes (their argv[0]); "" once the process has ended."""
    try:
        return (proc.cmdline() or [""])[0]
    except psutil.Error:
        return ""


def wait_for_exit(processes: list[psutil.Process], timeout: float = ENGINE_EXIT_WAIT_S) -> None:
    """Return once `processes` have exited, SIGKILLing those still there after `timeout`.

    vLLM's shutdown waits for the engine core only; the core's worker (our grandchild) learns
    of the core's exit a moment later and logs as it goes. Without this wait it could outlive
    `batchd` and write to the terminal after the process that started it has exited."""
    _, alive = psutil.wait_procs(processes, timeout=timeout)
    for proc in alive:
        try:
            proc.kill()
        except psutil.Error:
            pass
    psutil.wait_procs(alive, timeout=2)
