"""Runs input lines through the engine with a bounded sliding window.

The window refills as soon as any line finishes (no fixed chunks waiting on their slowest
line), and input is pulled lazily, so memory is bounded by the window whatever the file size.
Shared by the server's worker and `batchd run-batch`."""

from __future__ import annotations

import asyncio
import logging
from collections.abc import AsyncIterator, Awaitable, Callable
from dataclasses import dataclass

from app.core import metrics
from app.core.ids import new_request_id
from app.engine.protocol import LineRunner
from app.engine.results import Usage
from app.pipeline.fair_gate import FairGate, Ticket
from app.pipeline.lines import InputLine, response_line

log = logging.getLogger("batchd.executor")


@dataclass
class LineOutcome:
    line_no: int
    ok: bool
    record: dict
    usage: Usage


OnOutcome = Callable[[LineOutcome], Awaitable[None]]


class LineExecutor:
    def __init__(
        self,
        engine: LineRunner,
        window: int,
        gate: FairGate | None = None,
        ticket: Ticket | None = None,
        priority: int = 0,
    ) -> None:
        self.engine = engine
        self.window = max(1, window)
        # Shared by every batch on the same engine, which it admits by project share and deadline.
        self.gate = gate or FairGate(self.window)
        self.ticket = ticket or Ticket()
        # Every line of the batch carries it to the engine (app.pipeline.priority).
        self.priority = priority
        self._in_flight: dict[asyncio.Task, str] = {}

    async def _run_one(self, line: InputLine, on_outcome: OnOutcome) -> None:
        request_id = new_request_id()
        task = asyncio.current_task()
        assert task is not None, "each line runs in a task of its own"
        async with self.gate.slot(self.ticket):
            self._in_flight[task] = request_id
            try:
                with metrics.line_in_flight(line.body.get("model"), line.url):
                    result = await self.engine.execute(line.url, line.body, request_id, self.priority)
            finally:
                self._in_flight.pop(task, None)
        metrics.record_line(line.body.get("model"), line.url, result.status_code == 200, result.usage)
        record = response_line(line.custom_id, result.status_code, request_id, result.body)
        await on_outcome(LineOutcome(line.line_no, result.status_code == 200, record, result.usage))

    async def run(self, lines: AsyncIterator[InputLine], on_outcome: OnOutcome, stop: asyncio.Event) -> bool:
        """Execute every line unless `stop` is set; returns False if stopped early. In-flight
        requests are aborted on stop or cancellation; their lines produce no outcome.

        Bookkeeping is O(1) per finished line (a done-callback frees its slot and wakes the
        loop): waiting on the whole in-flight set each time would cost O(window) per line."""
        pending: set[asyncio.Task] = set()
        wake = asyncio.Event()
        failures: list[BaseException] = []
        free = self.window

        def finished(task: asyncio.Task) -> None:
            nonlocal free
            pending.discard(task)
            free += 1
            error = None if task.cancelled() else task.exception()
            if error is not None:
                failures.append(error)
            wake.set()

        def halted() -> bool:
            return stop.is_set() or bool(failures)

        async def wait_for_change() -> None:
            wake.clear()
            await wake.wait()

        stopper = asyncio.create_task(stop.wait())
        stopper.add_done_callback(lambda _: wake.set())
        try:
            async for line in lines:
                while free == 0 and not halted():
                    await wait_for_change()
                if halted():
                    break
                free -= 1
                task = asyncio.create_task(self._run_one(line, on_outcome))
                pending.add(task)
                task.add_done_callback(finished)
            while pending and not halted():
                await wait_for_change()
            if failures:
                raise failures[0]
            return not stop.is_set()
        finally:
            stopper.cancel()
            if pending:
                await self._abort(set(pending))

    async def _abort(self, tasks: set[asyncio.Task]) -> None:
        for task in tasks:
            request_id = self._in_flight.get(task)
            if request_id is not None:
                try:
                    await self.engine.abort(request_id)
                except Exception:  # noqa: BLE001 - best effort; the task is cancelled anyway
                    log.debug("abort of %s failed", request_id, exc_info=True)
            task.cancel()
        await asyncio.gather(*tasks, return_exceptions=True)
