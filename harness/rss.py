"""Sample resident memory in the background: peaks of a process and of its child processes
(vLLM runs its engine core in a child)."""

from __future__ import annotations

import threading

import psutil


class PeakRss:
    def __init__(self, pid: int, interval: float = 0.02) -> None:
        self.process = psutil.Process(pid)
        self.interval = interval
        self.baseline = self.process.memory_info().rss
        self.peak = self.baseline
        self.children_baseline = self._children_rss()
        self.children_peak = self.children_baseline
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)

    def _children_rss(self) -> int:
        total = 0
        for child in self.process.children(recursive=True):
            try:
                total += child.memory_info().rss
            except psutil.NoSuchProcess:
                pass
        return total

    def _run(self) -> None:
        while not self._stop.is_set():
            try:
                self.peak = max(self.peak, self.process.memory_info().rss)
                self.children_peak = max(self.children_peak, self._children_rss())
            except psutil.NoSuchProcess:
                return
            self._stop.wait(self.interval)

    def __enter__(self) -> PeakRss:
        self._thread.start()
        return self

    def __exit__(self, *exc) -> None:
        self._stop.set()
        self._thread.join()

    @property
    def growth(self) -> int:
        return self.peak - self.baseline
