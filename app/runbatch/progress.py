"""Progress for run-batch: a tqdm bar on a terminal, a plain log line every few seconds
otherwise (CI logs, files), and a summary at the end."""

from __future__ import annotations

import logging
import sys
import time

from tqdm import tqdm

log = logging.getLogger("batchd.run_batch")

LOG_EVERY_SECONDS = 10.0


class Progress:
    def __init__(self, total: int | None, already_done: int = 0) -> None:
        self.total = total
        self.already_done = already_done
        self.ok = 0
        self.failed = 0
        self.output_tokens = 0
        self.started = time.monotonic()
        # When the last line's output was written (close()): the summary's time ends there, not
        # after the engines' shutdown (seconds on CPU) that comes before it is printed.
        self.ended: float | None = None
        self._last_log = self.started
        self._bar = None
        if sys.stderr.isatty():
            self._bar = tqdm(total=total, initial=already_done, unit="line", dynamic_ncols=True, file=sys.stderr)

    @property
    def done(self) -> int:
        return self.ok + self.failed

    def update(self, ok: bool, output_tokens: int = 0) -> None:
        if ok:
            self.ok += 1
        else:
            self.failed += 1
        self.output_tokens += output_tokens
        now = time.monotonic()
        if self._bar is not None:
            self._bar.update(1)
            if self.done % 50 == 0:
                self._bar.set_postfix_str(f"{self.output_tokens / max(now - self.started, 1e-9):.0f} tok/s")
        elif now - self._last_log >= LOG_EVERY_SECONDS:
            self._last_log = now
            log.info("progress: %s", self._status(now))

    def _status(self, now: float) -> str:
        elapsed = max(now - self.started, 1e-9)
        rate = self.done / elapsed
        done = self.already_done + self.done
        text = f"{done}" + (f"/{self.total}" if self.total else "") + " lines"
        text += f", {rate:.1f} lines/s, {self.output_tokens / elapsed:.0f} tok/s"
        if self.total and rate > 0:
            text += f", ETA {max(self.total - done, 0) / rate:.0f} s"
        return text

    def summary(self) -> str:
        elapsed = max((self.ended or time.monotonic()) - self.started, 1e-9)
        return (
            f"done: {self.done} lines (ok {self.ok}, failed {self.failed}"
            + (f", {self.already_done} already done before --resume" if self.already_done else "")
            + f") in {elapsed:.1f} s; {self.done / elapsed:.1f} lines/s; "
            f"{self.output_tokens} output tokens ({self.output_tokens / elapsed:.0f} tok/s)"
        )

    def close(self) -> None:
        if self.ended is None:
            self.ended = time.monotonic()
        if self._bar is not None:
            self._bar.close()
