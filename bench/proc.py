"""Run a system's command as a child process, with its memory sampled from spawn to exit and
its combined stdout/stderr copied to a log file, noting when given markers first appear."""

from __future__ import annotations

import contextlib
import os
import re
import signal
import subprocess
import threading
import time
from collections import deque
from dataclasses import dataclass, field
from pathlib import Path

import psutil

from bench.measure import TreeRss
from harness import watchdog


@dataclass
class Finished:
    """A finished child: exit code, ``time.time()`` of spawn and exit, marker times, log."""

    returncode: int
    spawned: float
    exited: float
    markers: dict[str, float]
    matches: dict[str, re.Match]
    rss: TreeRss
    log_path: Path
    tail: list[str] = field(default_factory=list)

    @property
    def wall_s(self) -> float:
        return self.exited - self.spawned

    def failure(self) -> str:
        """A short description of a non-zero exit, with the end of the log."""
        return f"exit code {self.returncode}; log {self.log_path}:\n" + "".join(self.tail[-15:])


def run_logged(
    cmd: list[str],
    log_path: Path,
    *,
    env: dict[str, str],
    cwd: Path | None = None,
    markers: dict[str, str] | None = None,
    timeout: float = 7200,
) -> Finished:
    """Run ``cmd`` to completion. ``markers`` maps a name to a regex; the result holds the
    ``time.time()`` at which a log line first matched it (and the match)."""
    patterns = {name: re.compile(rx) for name, rx in (markers or {}).items()}
    seen: dict[str, float] = {}
    matches: dict[str, re.Match] = {}
    tail: deque[str] = deque(maxlen=50)
    spawned = time.time()
    # A process group of its own, killed by the watchdog should this process die first
    # (harness/watchdog.py); not a session, so the kernel schedules it as it did the bench.
    proc = subprocess.Popen(
        cmd,
        env=env,
        cwd=cwd,
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        stdin=subprocess.DEVNULL,
        process_group=0,
    )
    watchdog.register_group(proc.pid)
    rss = TreeRss(proc.pid).start()

    def pump() -> None:
        with log_path.open("w", encoding="utf-8", errors="replace") as log:
            for raw in proc.stdout:
                now = time.time()
                line = raw.decode("utf-8", errors="replace")
                log.write(line)
                tail.append(line)
                for name, pattern in patterns.items():
                    if name not in seen and (match := pattern.search(line)):
                        seen[name], matches[name] = now, match

    reader = threading.Thread(target=pump, name="log-pump", daemon=True)
    reader.start()
    try:
        proc.wait(timeout=timeout)
    except subprocess.TimeoutExpired:
        kill_tree(proc.pid)
        proc.wait()
    finally:
        exited = time.time()
        rss.stop()
        reader.join(timeout=30)
        # Whatever the command left behind in its group (engine processes) goes with it.
        with contextlib.suppress(ProcessLookupError):
            os.killpg(proc.pid, signal.SIGKILL)
        watchdog.unregister_group(proc.pid)
    return Finished(proc.returncode, spawned, exited, seen, matches, rss, log_path, list(tail))


def kill_tree(pid: int) -> None:
    """SIGKILL a process and its descendants (vLLM's engine processes outlive a killed parent
    for a while)."""
    try:
        root = psutil.Process(pid)
        procs = [*root.children(recursive=True), root]
    except psutil.NoSuchProcess:
        return
    for proc in procs:
        try:
            proc.kill()
        except psutil.NoSuchProcess:
            pass
    psutil.wait_procs(procs, timeout=30)
