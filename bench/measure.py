"""The bench's CPU reader: CPU seconds read from /proc (:func:`cpu_seconds`). Memory is sampled
by harness/rss.py (:class:`harness.rss.TreeRss`), the one sampler the tests use too."""

from __future__ import annotations

import resource

import psutil


def cpu_seconds(pid: int | None = None, *, tree: bool = False) -> float:
    """User + system CPU seconds of ``pid`` (this process when None), with its descendants'
    (those alive now) when ``tree``."""
    if pid is None and not tree:  # getrusage counts microseconds; /proc counts 10 ms ticks
        usage = resource.getrusage(resource.RUSAGE_SELF)
        return usage.ru_utime + usage.ru_stime
    root = psutil.Process(pid)
    procs = [root, *(root.children(recursive=True) if tree else ())]
    total = 0.0
    for proc in procs:
        try:
            times = proc.cpu_times()
        except (psutil.NoSuchProcess, psutil.ZombieProcess):
            continue
        total += times.user + times.system
    return total
