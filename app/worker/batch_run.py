"""Drives one claimed batch through its states until it is terminal or the lease is lost:
validating -> in_progress -> finalizing -> completed, with cancel and expiry on the way.
Every step re-reads the batch, so a restart resumes wherever the last one stopped."""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import AsyncIterator
from contextlib import suppress

from app.db.models import TERMINAL_STATUSES, Batch
from app.db.repositories.batches import BatchRepository, Claim, LeaseLost
from app.services.jsonl import split_lines
from app.services.validation import validate_input_file
from app.worker.checkpoint import Checkpoint
from app.worker.context import WorkerContext, fault_point
from app.worker.executor import LineExecutor
from app.worker.finalize import finalize
from app.worker.lines import InputLine, parse_input_line
from app.worker.ordering import grouped_by_prefix

log = logging.getLogger("batchd.worker")

# How often a running batch flushes finished lines and checks for cancel/expiry. Each check is
# two short transactions on the API's event loop, which shares a CPU with the engine core, so
# not too often: a crash loses at most a second of lines, and a cancel made through this
# process's API does not wait for the poll (Worker.wake -> BatchRun.check_now).
POLL_SECONDS = 1.0


class BatchRun:
    def __init__(self, ctx: WorkerContext, claim: Claim) -> None:
        self.ctx = ctx
        self.claim = claim
        self._check_now = asyncio.Event()

    def check_now(self) -> None:
        """Re-read the status now (a cancel arrived through this process's API)."""
        self._check_now.set()

    async def _load(self) -> Batch | None:
        async with self.ctx.db.read() as session:
            return await BatchRepository(session).load(self.claim.batch_id)

    async def _transition(self, from_statuses: tuple[str, ...], **values) -> bool:
        async with self.ctx.db.write() as session:
            return await BatchRepository(session).transition(self.claim, from_statuses, **values)

    async def run(self) -> None:
        heartbeat = asyncio.create_task(self._heartbeat(asyncio.current_task()))
        try:
            await self._drive()
        except LeaseLost:
            log.warning("lost the lease on %s; another worker has it", self.claim.batch_id)
        finally:
            heartbeat.cancel()
            with suppress(asyncio.CancelledError):
                await heartbeat
            with suppress(Exception):
                async with self.ctx.db.write() as session:
                    await BatchRepository(session).release(self.claim)

    async def _heartbeat(self, runner: asyncio.Task) -> None:
        interval = self.ctx.settings.lease_seconds / 3
        while True:
            await asyncio.sleep(interval)
            try:
                async with self.ctx.db.write() as session:
                    await BatchRepository(session).heartbeat(self.claim, time.time(), self.ctx.settings.lease_seconds)
            except LeaseLost:
                runner.cancel()
                return
            except Exception:  # noqa: BLE001 - a busy database: try again next beat
                log.warning("lease heartbeat for %s failed", self.claim.batch_id, exc_info=True)

    async def _drive(self) -> None:
        while True:
            batch = await self._load()
            if batch is None or batch.status in TERMINAL_STATUSES:
                return
            expired = time.time() >= batch.expires_at
            if batch.status in ("validating", "in_progress") and expired:
                await finalize(self.ctx, self.claim, batch, "expired")
            elif batch.status == "validating":
                await self._validate(batch)
            elif batch.status == "in_progress":
                await self._execute(batch)
            elif batch.status == "finalizing":
                await finalize(self.ctx, self.claim, batch, "completed")
            elif batch.status == "cancelling":
                await finalize(self.ctx, self.claim, batch, "cancelled")

    async def _validate(self, batch: Batch) -> None:
        settings = self.ctx.settings
        result = await validate_input_file(
            self.ctx.store.read(batch.project, batch.input_file_id),
            batch.endpoint,
            self.ctx.registry,
            max_lines=settings.max_batch_lines,
            max_errors=settings.max_validation_errors,
            shard_lines=settings.shard_lines,
        )
        await fault_point("validating", self.ctx.data_dir)
        now = int(time.time())
        if result.errors:
            await self._transition(("validating",), status="failed", failed_at=now, errors=result.errors,
                                   model=result.model)
        else:
            await self._transition(("validating",), status="in_progress", in_progress_at=now,
                                   total=result.total, model=result.model)

    async def _pending_lines(self, batch: Batch, done: set[int]) -> AsyncIterator[InputLine]:
        async for line_no, raw in split_lines(self.ctx.store.read(batch.project, batch.input_file_id)):
            if line_no not in done:
                line = parse_input_line(line_no, raw)
                if line is not None:
                    yield line

    async def _execute(self, batch: Batch) -> None:
        async with self.ctx.db.read() as session:
            done = await BatchRepository(session).finished_line_numbers(batch.id)
        checkpoint = Checkpoint(self.ctx.db, self.claim)
        executor = LineExecutor(self.ctx.registry, self.ctx.window(batch.model), self.ctx.gate(batch.model), batch.id)
        stop = asyncio.Event()
        monitor = asyncio.create_task(self._monitor(batch, checkpoint, stop))
        try:
            lines = grouped_by_prefix(self._pending_lines(batch, done))
            finished = await executor.run(lines, checkpoint.add, stop)
        finally:
            monitor.cancel()
            with suppress(asyncio.CancelledError):
                await monitor
            await checkpoint.flush()
        if finished:
            async with self.ctx.db.read() as session:
                recorded = await BatchRepository(session).count_lines(batch.id)
            # A line whose result was not recorded runs again on the next pass; finalize only
            # once every line has its row.
            if recorded >= batch.total:
                await self._transition(("in_progress",), status="finalizing", finalizing_at=int(time.time()))
            else:
                log.warning("batch %s: %d of %d lines recorded; running the rest again",
                            batch.id, recorded, batch.total)

    async def _monitor(self, batch: Batch, checkpoint: Checkpoint, stop: asyncio.Event) -> None:
        """Flush finished lines and stop the run when the batch is cancelled or expires."""
        while not stop.is_set():
            with suppress(asyncio.TimeoutError):
                await asyncio.wait_for(self._check_now.wait(), POLL_SECONDS)
            self._check_now.clear()
            await checkpoint.flush()
            async with self.ctx.db.read() as session:
                status = await BatchRepository(session).status(batch.id)
            if status != "in_progress" or time.time() >= batch.expires_at:
                stop.set()
