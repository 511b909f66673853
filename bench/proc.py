"""Run a system's command as a child process, with its memory sampled from spawn to exit and
its combined stdout/stderr copied to a log file, noting when given markers first appear."""

from __future__ import annotations

import re
import subprocess
import threading
import time
from collections import deque
from dataclasses import dataclass, field
from pathlib import Path

import psutil

from bench.measure import TreeRss


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
    proc = subprocess.Popen(
        cmd, env=env, cwd=cwd, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL
    )
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
