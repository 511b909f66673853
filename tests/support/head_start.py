"""Head starts: long subprocess work that one test needs (the bench harness smoke, the `vllm serve`
upstreams, the run-batch seed runs, the engine registry's own pytest session) starts when the
session starts, in a CPU cgroup with the smallest share, so it runs on
the CPU the rest of the suite leaves idle (on 2 cores most tests keep one busy, and an engine's
start is a single-threaded import chain) instead of alone when its test comes. The test then
moves it back to a full share and waits for it.

A test module registers its work at import (collection comes before any test runs); the session
fixture `head_starts` launches what the selected tests need. Without a writable cpu cgroup (not
root, or cgroup v2 below the root) the work runs at the normal share: only less idle time is used.
"""

from __future__ import annotations

import contextlib
import os
import subprocess
from collections.abc import Callable
from pathlib import Path
from typing import Protocol

import psutil

from harness import watchdog
from harness.process import ManagedProcess

# A share of 2 against the default 1024: under contention the head starts get about 0.2 %.
LOW_SHARE = "2"


class Job(Protocol):
    proc: subprocess.Popen | None

    def stop(self) -> None: ...


_REGISTERED: dict[str, tuple[set[Path], Callable[[Path], list[Job]]]] = {}


def register(test_file: str, name: str, launch: Callable[[Path], list[Job]]) -> None:
    """`launch(work_dir)` starts the work for tests in `test_file` and returns its jobs. Several
    files may register one name: its work starts once when any of them is selected."""
    files, _ = _REGISTERED.setdefault(name, (set(), launch))
    files.add(Path(test_file).resolve())


class BackgroundRun:
    """A command run to completion in its own process group, its output in files (stderr in
    the stdout file with `merge_stderr`, as a terminal shows them), its input from `stdin`."""

    def __init__(
        self,
        cmd: list[str],
        work_dir: Path,
        cwd: Path | None = None,
        *,
        env: dict[str, str] | None = None,
        stdin: bytes | None = None,
        merge_stderr: bool = False,
    ) -> None:
        work_dir.mkdir(parents=True, exist_ok=True)
        self.work_dir = work_dir
        self.stdout_path, self.stderr_path = work_dir / "stdout", work_dir / "stderr"
        stdin_path = None
        if stdin is not None:
            stdin_path = work_dir / "stdin"
            stdin_path.write_bytes(stdin)
        self.process = ManagedProcess(
            cmd,
            self.stdout_path,
            stderr_path=None if merge_stderr else self.stderr_path,
            stdin_path=stdin_path,
            env=env,
            cwd=cwd,
        ).start()

    @property
    def proc(self) -> subprocess.Popen | None:
        return self.process.proc

    def wait(self, timeout: float) -> subprocess.CompletedProcess:
        assert self.proc is not None
        try:
            self.proc.wait(timeout)
        finally:
            self.stop()
        return subprocess.CompletedProcess(
            self.proc.args,
            self.proc.returncode,
            self.stdout_path.read_text(errors="replace"),
            self.stderr_path.read_text(errors="replace") if self.stderr_path.exists() else "",
        )

    def stop(self) -> None:
        """Whatever is left of its process group goes."""
        self.process.kill()


class CpuGroup:
    """A child of this process's cpu cgroup with the smallest share (cgroup v1, or v2 at the root)."""

    def __init__(self, name: str) -> None:
        self.path: Path | None = None
        self.parent: Path | None = None
        with contextlib.suppress(OSError):
            parent, share_file, share = _own_cpu_cgroup()
            path = parent / name
            path.mkdir(exist_ok=True)
            self.path, self.parent = path, parent
            # Removed even when this process is SIGKILLed before `remove()`.
            watchdog.remove_dir_at_exit(path)
            (path / share_file).write_text(share)

    def add(self, pid: int) -> None:
        if self.path is not None:
            with contextlib.suppress(OSError):
                (self.path / "cgroup.procs").write_text(str(pid))

    def release(self, pid: int) -> None:
        """Back to the full share: `pid` and every process below it."""
        if self.parent is None:
            return
        with contextlib.suppress(psutil.Error):
            tree = [pid] + [child.pid for child in psutil.Process(pid).children(recursive=True)]
            for member in tree:
                with contextlib.suppress(OSError):
                    (self.parent / "cgroup.procs").write_text(str(member))

    def remove(self) -> None:
        if self.path is not None:
            with contextlib.suppress(OSError):
                for pid in (self.path / "cgroup.procs").read_text().split():
                    self.release(int(pid))
                self.path.rmdir()


def _own_cpu_cgroup() -> tuple[Path, str, str]:
    """(this process's cpu cgroup directory, the share file, the low share written to it)."""
    for line in Path("/proc/self/cgroup").read_text().splitlines():
        _, controllers, relative = line.split(":", 2)
        if "cpu" in controllers.split(","):
            return Path("/sys/fs/cgroup/cpu") / relative.lstrip("/"), "cpu.shares", LOW_SHARE
    v2 = Path("/sys/fs/cgroup")
    # Below the v2 root a cgroup with processes cannot enable controllers for its children.
    if Path("/proc/self/cgroup").read_text().strip() == "0::/" and "cpu" in (v2 / "cgroup.subtree_control").read_text():
        return v2, "cpu.weight", "1"
    raise OSError("no writable cpu cgroup")


class HeadStarts:
    """The registered work the selected tests need, launched at once in a low-share group."""

    def __init__(self, selected_files: set[Path], work_root: Path) -> None:
        self.group = CpuGroup(f"batchd-head-starts-{os.getpid()}")
        self.work_root = work_root
        self.jobs: dict[str, list[Job]] = {}
        try:
            for name, (test_files, _) in _REGISTERED.items():
                if test_files & selected_files:
                    self.jobs[name] = self._launch(name)
                    for job in self.jobs[name]:
                        self.group.add(job.proc.pid)
        except BaseException:
            self.close()
            raise

    def _launch(self, name: str) -> list[Job]:
        return _REGISTERED[name][1](self.work_root / name)

    def take(self, name: str) -> list[Job]:
        """`name`'s jobs, moved back to the full share (their test now waits for them); launched
        now if the session did not."""
        jobs = self.jobs.pop(name, None) or self._launch(name)
        for job in jobs:
            self.group.release(job.proc.pid)
        return jobs

    def close(self) -> None:
        """Stops what no test took (a test not reached), and removes the group."""
        for jobs in self.jobs.values():
            for job in jobs:
                job.stop()
        self.group.remove()
