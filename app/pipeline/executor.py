"""Runs input lines through the engine with a bounded sliding window.

The window refills as soon as any line finishes (no fixed chunks waiting on their slowest
line), and input is pulled lazily, so memory is bounded by the window whatever the file size.
Shared by the server's worker and `batchd run-batch`."""

from __future__ import annotations

import asyncio
import logging
from collections.abc import AsyncIterator, Awaitable, Callable
from dataclasses import dataclass

from app.core import metrics, tracing
from app.core.ids import new_request_id
from app.engine.audio import LINE_PROJECT
from app.engine.errors import LineCannotRun
from app.engine.poison import LINE_KEY
from app.engine.protocol import LineRunner
from app.engine.results import LineResult, Usage
from app.pipeline.fair_gate import FairGate, Grant, Ticket
from app.pipeline.lines import InputLine, error_line, response_line
from app.scheduling.priority import batch_priority, tenant_body
from app.scheduling.residency import Urgency

log = logging.getLogger("batchd.executor")

# Lines of one run waiting at their gates at once. One would bound memory best, but a project
# whose waiters were just admitted is absent from the gate until its next lines are read, and
# the slots freed meanwhile go to others: with 4, a project with one batch of two shards a
# replica got 37 % against a ten-batch project on the tests' two replicas (fair: 50 %); with 16
# it holds its share. Shards are at most twice the window, so the lines held stay bounded by it.
WAITING_LINES = 16


@dataclass
class LineOutcome:
    line_no: int
    ok: bool
    record: dict
    usage: Usage
    model: str | None = None  # the line's own model (a Message Batch's lines may name several)


OnOutcome = Callable[[LineOutcome], Awaitable[None]]
# The gate a line waits at, by the model it names (one gate per engine, shared by every batch).
GateLookup = Callable[[str | None], FairGate]


class LineExecutor:
    def __init__(
        self,
        engine: LineRunner,
        window: int,
        gates: FairGate | GateLookup | None = None,
        ticket: Ticket | None = None,
        tenant_priority_allowed: bool = False,
    ) -> None:
        self.engine = engine
        self.window = max(1, window)
        gate = gates if gates is not None else FairGate(self.window)
        self.gates: GateLookup = (lambda _model: gate) if isinstance(gate, FairGate) else gate
        self.ticket = ticket or Ticket()
        self.tenant_priority_allowed = tenant_priority_allowed
        self._in_flight: dict[asyncio.Task, str] = {}
        # Lines spawned with a slot already held, until they start (a task cancelled before
        # its first step never runs its own release).
        self._unstarted: dict[asyncio.Task, tuple[FairGate, Grant]] = {}

    async def _run_one(
        self,
        line: InputLine,
        on_outcome: OnOutcome,
        gate: FairGate,
        grant: Grant | None,
        admitted: Callable[[asyncio.Task], None],
    ) -> None:
        """Run one line: with `grant`, its slot is already held; else wait for one first."""
        model = line.body.get("model")
        task = asyncio.current_task()
        assert task is not None, "each line runs in a task of its own"
        self._unstarted.pop(task, None)
        if grant is None:
            grant = await gate.acquire(self.ticket)
            admitted(task)
        request_id = new_request_id()
        body = tenant_body(line.body, self.tenant_priority_allowed)
        self._in_flight[task] = request_id
        started = metrics.line_started(model)
        # What the engines weigh when they load a model on demand (app.scheduling.residency).
        # Whether its batch is at risk is read from the gate's policy (the scheduler's
        # projection) each time the residency plan runs, not frozen at the grant.
        urgency = Urgency(
            ahead=grant.ahead,
            deadline=self.ticket.deadline or float("inf"),
            single=self.ticket.single,
            start_by=self.ticket.start_by,
            batch_id=self.ticket.batch_id or None,
            risk=gate.policy.at_risk,
        )
        # Who the line is to the engines' supervision, across runs of its shard (app.engine.poison).
        LINE_KEY.set((self.ticket.batch_id, line.line_no))
        LINE_PROJECT.set(self.ticket.project)  # whose share of the audio slots the line takes
        try:
            with tracing.line_span(line.line_no, line.custom_id, line.url):
                result: LineResult | LineCannotRun = await self.engine.execute(
                    line.url, body, request_id, batch_priority(grant.ahead, grant.behind), urgency=urgency
                )
        except LineCannotRun as exc:
            # The line was in flight at two of its engine's deaths (engine_crashed), or its
            # engine could not take it in time (a flex request): no later run would fare
            # better. (An engine that died is restarted inside execute, and the line runs
            # again there.)
            result = exc
        finally:
            metrics.line_ended(model, line.url, started)
            self._in_flight.pop(task, None)
            gate.release(grant)
        if isinstance(result, LineCannotRun):
            ok, usage, record = False, Usage(), error_line(line.custom_id, result.code, str(result))
        else:
            ok, usage = result.status_code == 200, result.usage
            record = response_line(line.custom_id, result.status_code, request_id, result.body)
        metrics.record_line(model, line.url, ok, usage)
        named = model if isinstance(model, str) else None
        await on_outcome(LineOutcome(line.line_no, ok, record, usage, named))

    async def run(
        self,
        lines: AsyncIterator[InputLine],
        on_outcome: OnOutcome,
        stop: asyncio.Event,
        drain: asyncio.Event | None = None,
    ) -> bool:
        """Execute every line unless `stop` or `drain` is set; returns False if either ended it
        early. On stop (or cancellation) in-flight requests are aborted and their lines produce
        no outcome; on drain no further line starts and those in flight finish.

        At most WAITING_LINES lines wait at their gates at a time: the next is read once one is
        admitted, so the lines held by all shards together stay near the engines' windows,
        however many shards (projects) there are. Bookkeeping is O(1) per finished line (a
        done-callback frees its slot and wakes the loop): waiting on the whole in-flight set
        would cost O(window)."""
        pending: set[asyncio.Task] = set()
        wake = asyncio.Event()
        failures: list[BaseException] = []
        # Room for a window in flight and WAITING_LINES more waiting: a run that holds every slot
        # of its gate still has lines waiting there, so a slot it frees goes to its own next
        # line if that one is due first, not to a later batch's line that happens to wait (at
        # the fleet's slots, a 1h batch's freed slots went to its project's 24h batch a third
        # of the time). The gate bounds the lines in flight.
        free = self.window + WAITING_LINES
        waiting: set[asyncio.Task] = set()  # lines waiting at their gates

        def admitted(task: asyncio.Task) -> None:
            waiting.discard(task)
            wake.set()

        def finished(task: asyncio.Task) -> None:
            nonlocal free
            pending.discard(task)
            waiting.discard(task)
            free += 1
            unstarted = self._unstarted.pop(task, None)
            if unstarted is not None:
                unstarted[0].release(unstarted[1])
            error = None if task.cancelled() else task.exception()
            if error is not None:
                failures.append(error)
            wake.set()

        def halted() -> bool:
            return stop.is_set() or bool(failures) or (drain is not None and drain.is_set())

        async def wait_for_change() -> None:
            wake.clear()
            await wake.wait()

        watchers = [asyncio.create_task(event.wait()) for event in (stop, drain) if event is not None]
        for watcher in watchers:
            watcher.add_done_callback(lambda _: wake.set())
        read_all = True
        try:
            async for line in lines:
                while (free == 0 or len(waiting) >= WAITING_LINES) and not halted():
                    await wait_for_change()
                if halted():
                    read_all = False
                    break
                free -= 1
                model = line.body.get("model")
                gate = self.gates(model if isinstance(model, str) else None)
                grant = gate.try_acquire(self.ticket)  # a free slot: no task waits for it
                task = asyncio.create_task(self._run_one(line, on_outcome, gate, grant, admitted))
                if grant is None:
                    waiting.add(task)
                else:
                    self._unstarted[task] = (gate, grant)
                pending.add(task)
                task.add_done_callback(finished)
            if waiting and halted():
                for task in waiting:
                    task.cancel()  # not admitted: nothing was sent, it runs when the shard next does
                read_all = False
            while pending and not (stop.is_set() or failures):
                await wait_for_change()
            if failures:
                raise failures[0]
            return read_all and not stop.is_set()
        finally:
            for watcher in watchers:
                watcher.cancel()
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
