"""The bench's one process runner: every child a workload starts (a system's command, the bare
client, the load probe, py-spy) runs through :class:`Child`, on harness/process.py's
``ManagedProcess`` (its own process group, registered with the watchdog, so it dies with the
bench). Its memory is sampled from spawn to exit (harness/rss.py), its combined stdout and
stderr go to a log file, and the time at which given markers first appear is noted. Servers and
fleets come from harness/ (``ServerProcess``, ``FakeFleet``, ``VllmServer``), on the same class.

:func:`output` is for short commands whose stdout is the answer (``git``)."""

from __future__ import annotations

import json
import re
import signal
import subprocess
import time
from collections import deque
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from harness.process import ManagedProcess
from harness.rss import TreeRss


@dataclass
class Finished:
    """A finished child: exit code (negative when killed, e.g. at its timeout), ``time.time()`` of
    spawn and exit, marker times and matches, its memory, the end of its log."""

    returncode: int
    spawned: float
    exited: float
    markers: dict[str, float]
    matches: dict[str, re.Match[str]]
    rss: TreeRss
    log_path: Path
    tail: list[str] = field(default_factory=list)

    @property
    def wall_s(self) -> float:
        return self.exited - self.spawned

    def failure(self) -> str:
        """A short description of a non-zero exit, with the end of the log."""
        return f"exit code {self.returncode}; log {self.log_path}:\n" + "".join(self.tail[-15:])

    def last_json(self) -> Any:
        """The last line of output that parses as JSON (a child's result line)."""
        for line in reversed(self.tail):
            if line.lstrip().startswith(("{", "[")):
                try:
                    return json.loads(line)
                except ValueError:
                    continue
        raise ValueError(f"no JSON line in the output of {self.log_path}:\n" + "".join(self.tail[-15:]))


class Child:
    """``cmd`` started in a process group of its own (not a session: the kernel schedules it with
    the bench, as it did the bench); ``markers`` maps a name to a regex whose first matching
    output line's ``time.time()`` (and match) the result holds."""

    def __init__(
        self,
        cmd: Sequence[str],
        log_path: Path,
        *,
        env: Mapping[str, str] | None = None,
        cwd: Path | None = None,
        markers: Mapping[str, str] | None = None,
    ) -> None:
        self._patterns = {name: re.compile(rx) for name, rx in (markers or {}).items()}
        self._seen: dict[str, float] = {}
        self._matches: dict[str, re.Match[str]] = {}
        self._tail: deque[str] = deque(maxlen=50)
        self.process = ManagedProcess(cmd, log_path, env=env, cwd=cwd, session=False, on_line=self._line)
        self.spawned = 0.0
        self.rss: TreeRss | None = None

    def _line(self, line: str, read_at: float) -> None:
        self._tail.append(line)
        for name, pattern in self._patterns.items():
            if name not in self._seen and (match := pattern.search(line)):
                self._seen[name], self._matches[name] = read_at, match

    @property
    def pid(self) -> int:
        return self.process.pid

    def start(self) -> Child:
        self.spawned = time.time()
        self.process.start()
        self.rss = TreeRss(self.process.pid).start()
        return self

    def finish(self, timeout: float) -> Finished:
        """Wait up to ``timeout`` seconds for it to exit; then whatever is left of its group
        (engine processes) is killed either way."""
        self.process.wait(timeout)
        return self._ended()

    def interrupt(self, grace: float) -> Finished:
        """SIGINT (py-spy writes its file on it), up to ``grace`` seconds to exit, then the group goes."""
        self.process.stop(grace, signal.SIGINT)
        return self._ended()

    def _ended(self) -> Finished:
        exited = time.time()
        assert self.rss is not None and self.process.proc is not None
        self.rss.stop()
        self.process.kill()
        return Finished(
            self.process.proc.returncode,
            self.spawned,
            exited,
            dict(self._seen),
            dict(self._matches),
            self.rss,
            self.process.log_path,
            list(self._tail),
        )


def run_logged(
    cmd: Sequence[str],
    log_path: Path,
    *,
    env: Mapping[str, str] | None = None,
    cwd: Path | None = None,
    markers: Mapping[str, str] | None = None,
    timeout: float = 7200,
) -> Finished:
    """Run ``cmd`` to completion (or ``timeout``) as a :class:`Child`."""
    return Child(cmd, log_path, env=env, cwd=cwd, markers=markers).start().finish(timeout)


CommandFailed = subprocess.CalledProcessError


def output(cmd: Sequence[str], cwd: Path | None = None, timeout: float = 120) -> str:
    """The stripped stdout of a short command; raises ``OSError`` or :data:`CommandFailed`."""
    return subprocess.run(
        list(cmd), cwd=cwd, capture_output=True, text=True, check=True, timeout=timeout
    ).stdout.strip()
