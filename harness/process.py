"""A child process in a process group of its own, output to log files, registered with the
watchdog (harness/watchdog.py) so it dies with the process that started it; and the wait for a
child's HTTP endpoint to answer; and stopping several at once."""

from __future__ import annotations

import contextlib
import os
import signal
import subprocess
import threading
import time
from collections.abc import Callable, Iterable, Mapping, Sequence
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Protocol

import httpx

from harness import watchdog
from harness.client import tls_context
from harness.poll import wait_until

# How long a stop waits for the rest of a killed group (engine processes) to exit.
GROUP_EXIT_S = 15.0


class Stoppable(Protocol):
    def stop(self) -> None: ...


def stop_all(processes: Iterable[Stoppable]) -> None:
    """`stop()` each at once, not one by one (each may wait out its grace period); returns when
    all have stopped."""
    with ThreadPoolExecutor(8) as pool:
        list(pool.map(lambda process: process.stop(), processes))


class ManagedProcess:
    """`cmd` started in a new session (or, with `session=False`, only a new process group, so
    a niceness still counts against the rest of the session: the kernel's autogroup schedules a
    session as one). `stop()` asks the leader (or the whole group) to end, and after the grace
    period SIGKILLs whatever is left of the group; either way the group is gone on return.

    With `on_line`, stdout and stderr come through a pipe: a thread copies each line to the log
    and calls `on_line(line, time.time() it was read)` (a benchmark times its child by what it
    prints)."""

    def __init__(
        self,
        cmd: Sequence[str],
        log_path: Path,
        *,
        stderr_path: Path | None = None,
        stdin_path: Path | None = None,
        env: Mapping[str, str] | None = None,
        cwd: Path | None = None,
        session: bool = True,
        niceness: int = 0,
        on_line: Callable[[str, float], None] | None = None,
    ) -> None:
        self.cmd = list(cmd)
        self.log_path = log_path
        self.stderr_path = stderr_path
        self.stdin_path = stdin_path
        self.env = dict(env) if env is not None else None
        self.cwd = cwd
        self.session = session
        self.niceness = niceness
        self.on_line = on_line
        self.proc: subprocess.Popen | None = None
        self._pump: threading.Thread | None = None
        # Set once its group was killed and reaped: its id may belong to another group later.
        self.ended = False

    @property
    def pid(self) -> int:
        assert self.proc is not None
        return self.proc.pid

    def start(self) -> ManagedProcess:
        niceness = self.niceness
        with contextlib.ExitStack() as files:
            out = subprocess.PIPE if self.on_line else files.enter_context(open(self.log_path, "ab"))
            err = files.enter_context(open(self.stderr_path, "ab")) if self.stderr_path else subprocess.STDOUT
            stdin = files.enter_context(open(self.stdin_path, "rb")) if self.stdin_path else subprocess.DEVNULL
            self.proc = subprocess.Popen(
                self.cmd,
                env=self.env,
                cwd=self.cwd,
                stdin=stdin,
                stdout=out,
                stderr=err,
                start_new_session=self.session,
                process_group=None if self.session else 0,
                preexec_fn=(lambda: os.nice(niceness)) if niceness else None,
            )
        watchdog.register_group(self.proc.pid)
        if self.on_line:
            self._pump = threading.Thread(target=self._copy_lines, args=(self.on_line,), name="log-pump", daemon=True)
            self._pump.start()
        return self

    def _copy_lines(self, on_line: Callable[[str, float], None]) -> None:
        assert self.proc is not None and self.proc.stdout is not None
        with open(self.log_path, "ab") as log:
            for raw in self.proc.stdout:
                read_at = time.time()
                log.write(raw)
                on_line(raw.decode("utf-8", errors="replace"), read_at)

    def wait(self, timeout: float) -> int | None:
        """The exit code once the leader exits within `timeout` seconds, else None (it runs on)."""
        assert self.proc is not None
        try:
            return self.proc.wait(timeout)
        except subprocess.TimeoutExpired:
            return None

    def running(self) -> bool:
        return self.proc is not None and self.proc.poll() is None

    def returncode(self) -> int | None:
        """The exit status once it ended (None while running or never started)."""
        return self.proc.poll() if self.proc is not None else None

    def log(self, tail: int = 5000) -> str:
        return self.log_path.read_text(errors="replace")[-tail:] if self.log_path.exists() else ""

    def stop(self, grace: float = 60, sig: int = signal.SIGTERM, group: bool = False) -> None:
        """Send `sig` to the leader (or to the whole group) and wait up to `grace` seconds for
        it to exit; then SIGKILL the group and wait for every member to be gone."""
        if self.proc is None or self.ended:
            return
        if self.proc.poll() is None:
            with contextlib.suppress(ProcessLookupError):
                (os.killpg if group else os.kill)(self.proc.pid, sig)
            with contextlib.suppress(subprocess.TimeoutExpired):
                self.proc.wait(grace)
        self._end_group()

    def kill(self) -> None:
        """SIGKILL the whole group at once."""
        if self.proc is not None and not self.ended:
            self._end_group()

    def _end_group(self) -> None:
        assert self.proc is not None
        pgid = self.proc.pid
        with contextlib.suppress(ProcessLookupError):
            os.killpg(pgid, signal.SIGKILL)
        self.proc.wait()
        self.ended = True
        if self._pump is not None:
            # EOF once every member holding the pipe is gone; a stray one must not hang the caller.
            self._pump.join(timeout=30)
        # The other members (engine processes, now init's children) are reaped on their own time;
        # one that outlasts the wait is still registered, so the watchdog kills it again.
        with contextlib.suppress(TimeoutError):
            wait_until(lambda: not group_alive(pgid), GROUP_EXIT_S, f"process group {pgid} to end", 0.05)
            watchdog.unregister_group(pgid)


def group_alive(pgid: int) -> bool:
    try:
        os.killpg(pgid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True


def wait_http_ok(url: str, process: ManagedProcess, timeout: float, what: str = "") -> None:
    """Poll `url` until it answers 200; fail early with the log when the process exits."""
    name = what or process.cmd[0]

    def answers() -> bool:
        if not process.running():
            raise RuntimeError(f"{name} exited with {process.returncode()}:\n{process.log()}")
        try:
            return http.get(url).status_code == 200
        except httpx.HTTPError:
            return False

    # One client for the whole wait: a client a poll cost 30 ms of CPU the starting process needs.
    with httpx.Client(timeout=2, verify=tls_context()) as http:
        wait_until(answers, timeout, lambda: f"{name} to answer {url}:\n{process.log()}", interval=0.2)
