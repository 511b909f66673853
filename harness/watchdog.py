"""A watchdog that takes a process's children down with it, however that process dies.

The harness starts every child in a process group of its own, so that a stop reaches its
grandchildren too (vLLM's engine processes). That same group keeps the child alive when its
parent dies: a SIGKILLed pytest or `python -m bench` would leave its servers running. So the first
child a process registers also starts, for that process, a watchdog (`python -m harness.watchdog`,
in a session of its own) that reads registrations from a pipe whose only writer is the process it
watches. When that process dies, even by SIGKILL, the kernel closes its end and the watchdog reads
end-of-file; it then SIGKILLs every process group and process still registered, removes the
registered directories (cpu cgroups) once they are empty, and exits. A child stopped the ordinary
way is unregistered first, so a reused id is never hit.

PR_SET_PDEATHSIG would not do: it fires when the forking *thread* exits, and it is not inherited
by grandchildren.
"""

from __future__ import annotations

import contextlib
import os
import select
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path
from typing import BinaryIO

ROOT = Path(__file__).resolve().parents[1]
# How long the watchdog keeps trying to remove a directory whose processes are still exiting.
RMDIR_PATIENCE_S = 15.0

_lock = threading.Lock()
_pipe: BinaryIO | None = None
# The process that started the watchdog behind `_pipe`: a forked child starts its own.
_owner: int | None = None
_watchdog: subprocess.Popen | None = None


def register_group(pgid: int) -> None:
    """SIGKILL process group `pgid` if this process dies before `unregister_group(pgid)`."""
    _send(f"group {pgid}")


def unregister_group(pgid: int) -> None:
    _send(f"ungroup {pgid}")


def register_pid(pid: int) -> None:
    """SIGKILL process `pid` (one outside any group of ours, e.g. a daemonized postmaster)."""
    _send(f"pid {pid}")


def unregister_pid(pid: int) -> None:
    _send(f"unpid {pid}")


def remove_dir_at_exit(path: Path) -> None:
    """rmdir `path` once this process is dead and its children gone (an empty cgroup)."""
    _send(f"rmdir {path}")


def _send(line: str) -> None:
    global _pipe, _owner, _watchdog
    with _lock:
        if _pipe is None or _owner != os.getpid():
            read, write = os.pipe()
            _watchdog = subprocess.Popen(
                [sys.executable, "-m", "harness.watchdog", str(os.getpid())],
                stdin=read,
                stdout=subprocess.DEVNULL,
                cwd=ROOT,
                start_new_session=True,
            )
            os.close(read)
            _pipe, _owner = os.fdopen(write, "wb"), os.getpid()
        _pipe.write(line.encode() + b"\n")
        _pipe.flush()


def _watch(owner: int) -> None:
    """Read registrations from stdin until the owner is gone, then take its children down."""
    groups: set[int] = set()
    pids: set[int] = set()
    dirs: list[Path] = []
    pending = b""
    while True:
        readable, _, _ = select.select([0], [], [], 1.0)
        if not readable:
            # A fork of the owner that never exec'd may hold the pipe open: the owner's own exit
            # still shows as this process being reparented.
            if os.getppid() != owner:
                break
            continue
        chunk = os.read(0, 65536)
        if not chunk:
            break
        *lines, pending = (pending + chunk).split(b"\n")
        for line in lines:
            verb, _, arg = line.decode().partition(" ")
            if verb == "group":
                groups.add(int(arg))
            elif verb == "ungroup":
                groups.discard(int(arg))
            elif verb == "pid":
                pids.add(int(arg))
            elif verb == "unpid":
                pids.discard(int(arg))
            elif verb == "rmdir":
                dirs.append(Path(arg))
    for pgid in groups:
        with contextlib.suppress(ProcessLookupError, PermissionError):
            os.killpg(pgid, signal.SIGKILL)
    for pid in pids:
        with contextlib.suppress(ProcessLookupError, PermissionError):
            os.kill(pid, signal.SIGKILL)
    _remove_dirs(dirs)


def _remove_dirs(dirs: list[Path]) -> None:
    deadline = time.monotonic() + RMDIR_PATIENCE_S
    left = [d for d in dirs if d.exists()]
    while left and time.monotonic() < deadline:
        for directory in list(left):
            try:
                directory.rmdir()
                left.remove(directory)
            except FileNotFoundError:
                left.remove(directory)
            except OSError:
                pass  # busy: its last processes are still exiting
        if left:
            time.sleep(0.2)


if __name__ == "__main__":
    # Ctrl-C and hang-ups are the owner's business; this process ends when the owner has.
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    signal.signal(signal.SIGHUP, signal.SIG_IGN)
    _watch(int(sys.argv[1]))
