"""Names what stalls the event loop. Every request, lease heartbeat and engine output waits on
the one loop; a stall of seconds shows as slow requests, and one longer than the HTTP keep-alive
as idle connections closed under their clients. A thread (it runs while the loop does not) logs
the loop thread's stack once per stall, so the log says which code held it."""

from __future__ import annotations

import asyncio
import logging
import sys
import threading
import time
import traceback

log = logging.getLogger("batchd.loop")

TICK_SECONDS = 0.25
# Far above a busy loop's normal lateness (tens of ms), and a CPU-starved host's (hundreds).
STALL_SECONDS = 2.0


class LoopWatch:
    """`async with LoopWatch():` inside the loop to watch; the thread ends with the block."""

    def __init__(self, stall_seconds: float = STALL_SECONDS) -> None:
        self.stall_seconds = stall_seconds
        self._beat = time.monotonic()
        self._stop = threading.Event()
        self._loop_thread = threading.get_ident()
        self.stalls = 0

    async def _tick(self) -> None:
        while True:
            self._beat = time.monotonic()
            await asyncio.sleep(TICK_SECONDS)

    def _watch(self) -> None:
        reported = 0.0  # the beat already reported: one warning per stall
        while not self._stop.wait(TICK_SECONDS):
            beat = self._beat
            if reported and beat != reported:  # the loop ran again: say how long it was held
                log.warning("the event loop ran again after %.1f s", beat - reported)
                reported = 0.0
            stalled = time.monotonic() - beat
            if stalled > self.stall_seconds and beat != reported:
                reported = beat
                self.stalls += 1
                frame = sys._current_frames().get(self._loop_thread)
                where = "".join(traceback.format_stack(frame)[-12:]) if frame is not None else "(no frame)"
                log.warning("the event loop has not run for %.1f s; it is at:\n%s", stalled, where)

    async def __aenter__(self) -> LoopWatch:
        self._loop_thread = threading.get_ident()
        self._ticker = asyncio.create_task(self._tick())
        self._thread = threading.Thread(target=self._watch, name="batchd-loop-watch", daemon=True)
        self._thread.start()
        return self

    async def __aexit__(self, *exc: object) -> None:
        self._stop.set()
        self._ticker.cancel()
        self._thread.join()
