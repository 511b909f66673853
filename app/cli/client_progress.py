"""Waiting for a batch to end: a tqdm bar on stderr when it is a terminal (lines done and failed
of the total, rate, ETA), else a line on stderr when the status changes and at most every
LINE_SECONDS while lines finish (a CI log stays short)."""

from __future__ import annotations

import sys
import time
from typing import TYPE_CHECKING, Any

from app.core.statuses import TERMINAL_BATCH_STATUSES

if TYPE_CHECKING:
    import openai

TERMINAL = TERMINAL_BATCH_STATUSES
LINE_SECONDS = 5.0


def _counts(batch: Any) -> tuple[int, int, int]:
    counts = batch.request_counts
    if counts is None:
        return 0, 0, 0
    return counts.completed, counts.failed, counts.total


class _Bar:
    def __init__(self, batch_id: str) -> None:
        from tqdm import tqdm

        self.bar = tqdm(desc=batch_id, unit="line", file=sys.stderr, dynamic_ncols=True, total=None)

    def show(self, batch: Any) -> None:
        completed, failed, total = _counts(batch)
        if total and self.bar.total != total:
            self.bar.total = total
        self.bar.set_postfix_str(f"{batch.status}, {failed} failed", refresh=False)
        self.bar.update(completed + failed - self.bar.n)

    def close(self) -> None:
        self.bar.close()


class _Lines:
    def __init__(self, batch_id: str) -> None:
        self.batch_id = batch_id
        self.started = time.monotonic()
        self.shown: tuple[str, int, int, int] | None = None
        self.shown_at = 0.0

    def show(self, batch: Any) -> None:
        completed, failed, total = _counts(batch)
        state = (batch.status, completed, failed, total)
        now = time.monotonic()
        if state == self.shown:
            return
        if self.shown is not None and batch.status == self.shown[0] and now - self.shown_at < LINE_SECONDS:
            return
        self.shown, self.shown_at = state, now
        done = completed + failed
        line = f"{self.batch_id} {batch.status}: {done}/{total} lines ({failed} failed)"
        elapsed = now - self.started
        if done and elapsed > 0 and batch.status not in TERMINAL:
            rate = done / elapsed
            line += f", {rate:.1f} lines/s, ETA {max(total - done, 0) / rate:.0f}s"
        print(line, file=sys.stderr, flush=True)

    def close(self) -> None:
        pass


def wait(client: openai.OpenAI, batch: Any, poll_seconds: float) -> Any:
    """The batch once it has ended, polled every `poll_seconds`, its progress shown on stderr."""
    view = _Bar(batch.id) if sys.stderr.isatty() else _Lines(batch.id)
    try:
        view.show(batch)
        while batch.status not in TERMINAL:
            time.sleep(poll_seconds)
            batch = client.batches.retrieve(batch.id)
            view.show(batch)
    finally:
        view.close()
    return batch
