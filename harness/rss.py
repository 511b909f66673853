"""The one resident-memory sampler (the tests' and the bench's): the RSS of a process tree (a main
process and every descendant: vLLM's engine core and worker processes), sampled with psutil in a
background thread (:class:`TreeRss`) or read once (:func:`tree_rss`).

Recorded: each process's own peak, the peak of the tree's total (sum of RSS at one sample;
shared library pages count once per process, the same way for every system), the main process's
growth over its first sample, and the timestamped totals, so a peak can also be taken over a
time window (e.g. processing only).
"""

from __future__ import annotations

import bisect
import threading
import time
from collections.abc import Callable

import psutil

MB = 1024 * 1024
# torch.compile's one-off C++ builds (the first engine start after a cache miss) run as
# children of the engine; they are a build cost, not the system's memory, so they are counted
# apart (``compiler_processes``) rather than in the totals.
TOOLCHAIN = frozenset({"g++", "gcc", "c++", "cc", "cc1", "cc1plus", "collect2", "ld", "ld.bfd", "ld.gold", "as"})


class TreeRss:
    """Sample the RSS of the tree rooted at ``root`` (a pid, or a callable returning the pid
    once the process exists) every ``interval`` seconds until :meth:`stop`."""

    def __init__(self, root: int | Callable[[], int | None], interval: float = 0.1) -> None:
        self._root = root if callable(root) else (lambda: root)
        self.interval = interval
        self.peak_total = 0
        self.times: list[float] = []
        self.totals: list[int] = []
        # The main process's own CPU seconds (user + system, not its children's) at each sample:
        # the front end's cost, apart from vLLM's engine core and workers.
        self.main_cpu: list[float] = []
        self._peaks: dict[int, int] = {}
        self._first: dict[int, int] = {}  # each process's RSS at its first sample
        self._main: int | None = None
        self._names: dict[int, str] = {}
        self._compilers: set[int] = set()
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, name="tree-rss", daemon=True)

    def start(self) -> TreeRss:
        """Take the first sample now when the root exists (the baseline of :attr:`growth`), then
        go on in the background."""
        root = self._process()
        if root is not None:
            self._sample(root)
        self._thread.start()
        return self

    def stop(self) -> None:
        self._stop.set()
        self._thread.join()

    def __enter__(self) -> TreeRss:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()

    @property
    def peaks(self) -> dict[str, int]:
        """Each process's own peak RSS by label: "main" for the root, else its name,
        numbered when two share one ("python3.11 #2")."""
        out: dict[str, int] = {}
        for pid in sorted(self._peaks):
            label, n = self._names[pid], 2
            while label in out:
                label, n = f"{self._names[pid]} #{n}", n + 1
            out[label] = self._peaks[pid]
        return out

    @property
    def growth(self) -> int:
        """The main process's own peak RSS over its first sample, in bytes (0 before a sample)."""
        if self._main is None:
            return 0
        return self._peaks[self._main] - self._first[self._main]

    def peak_between(self, start: float, end: float) -> int:
        """Peak of the tree's total between two ``time.time()`` instants (0 if no sample)."""
        lo, hi = bisect.bisect_left(self.times, start), bisect.bisect_right(self.times, end)
        return max(self.totals[lo:hi], default=0)

    def main_cpu_between(self, start: float, end: float) -> float | None:
        """The main process's CPU seconds between the first sample at or after ``start`` and the
        last at or before ``end`` (None without two such samples)."""
        lo, hi = bisect.bisect_left(self.times, start), bisect.bisect_right(self.times, end) - 1
        return round(self.main_cpu[hi] - self.main_cpu[lo], 3) if hi > lo else None

    def summary(self, window: tuple[float, float] | None = None) -> dict:
        """MB figures for a report: whole-run peak, optional window peak, per-process peaks."""
        out = {
            "peak_total_mb": round(self.peak_total / MB, 1),
            "processes": len(self.peaks),
            "per_process_peak_mb": {label: round(rss / MB, 1) for label, rss in self.peaks.items()},
            "compiler_processes": len(self._compilers),
        }
        if window is not None:
            out["peak_processing_mb"] = round(self.peak_between(*window) / MB, 1)
            out["main_cpu_processing_s"] = self.main_cpu_between(*window)
        return out

    def _process(self) -> psutil.Process | None:
        pid = self._root()
        try:
            return psutil.Process(pid) if pid is not None else None
        except psutil.NoSuchProcess:
            return None

    def _run(self) -> None:
        root = None
        while root is None and not self._stop.is_set():
            if self._root() is not None:
                root = self._process()
                if root is None:  # gone before its first sample
                    return
            else:
                self._stop.wait(0.01)
        while root is not None and not self._stop.is_set():
            if not self._sample(root):
                return
            self._stop.wait(self.interval)

    def _sample(self, root: psutil.Process) -> bool:
        try:
            procs = [root, *root.children(recursive=True)]
        except psutil.NoSuchProcess:
            return False
        try:
            own = root.cpu_times()
        except psutil.NoSuchProcess:
            return False
        total = 0
        for proc in procs:
            try:
                rss = proc.memory_info().rss
                # Read every time: a spawned vLLM process sets its title after it starts.
                name = "main" if proc.pid == root.pid else _name(proc)
            except (psutil.NoSuchProcess, psutil.AccessDenied, psutil.ZombieProcess):
                continue
            if name in TOOLCHAIN:
                self._compilers.add(proc.pid)
                continue
            self._names[proc.pid] = name
            self._first.setdefault(proc.pid, rss)
            total += rss
            self._peaks[proc.pid] = max(self._peaks.get(proc.pid, 0), rss)
        self._main = root.pid
        self.times.append(time.time())
        self.totals.append(total)
        self.main_cpu.append(own.user + own.system)
        self.peak_total = max(self.peak_total, total)
        return True


def tree_rss(pid: int) -> int:
    """The RSS of ``pid`` and its descendants now, in bytes (compiler processes left out, as
    :class:`TreeRss` does)."""
    root = psutil.Process(pid)
    total = root.memory_info().rss
    for child in root.children(recursive=True):
        try:
            if _name(child) not in TOOLCHAIN:
                total += child.memory_info().rss
        except (psutil.NoSuchProcess, psutil.AccessDenied, psutil.ZombieProcess):
            pass
    return total


def _name(proc: psutil.Process) -> str:
    """vLLM's process title (VLLM::EngineCore, VLLM::Worker, ...) or the executable name."""
    cmdline = proc.cmdline()
    return cmdline[0] if cmdline and cmdline[0].startswith("VLLM::") else proc.name()
