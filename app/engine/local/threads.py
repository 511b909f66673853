"""Changing every thread of a set of processes (CPU affinity, niceness): Linux applies both per
thread, and threads started before the change (tokenizer pools, zmq) would keep the old value."""

from __future__ import annotations

from collections.abc import Callable, Iterable

import psutil


def apply_to_threads(processes: Iterable[psutil.Process], apply: Callable[[int], None]) -> None:
    """`apply(thread_id)` for every thread of `processes`; a process or thread that ended, or one
    not ours to change, is skipped."""
    for proc in processes:
        try:
            threads = proc.threads()
        except psutil.Error:
            continue
        for thread in threads:
            try:
                apply(thread.id)
            except (ProcessLookupError, PermissionError):
                pass
