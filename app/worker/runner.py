"""The in-process worker: claims active batches (up to a limit) and runs each as a task.

Shutdown drains: it stops claiming, aborts in-flight engine requests, checkpoints what finished
and releases the leases so another process (or the next start) resumes at once."""

from __future__ import annotations

import asyncio
import logging
import time
from contextlib import suppress

from app.db.repositories.batches import BatchRepository, Claim
from app.worker.batch_run import BatchRun
from app.worker.context import WorkerContext

log = logging.getLogger("batchd.worker")

# Batches created through this process wake the worker at once; the poll only picks up work
# from other processes (their batches, expired leases), so it need not be fast.
IDLE_POLL_SECONDS = 1.0
# A batch whose run failed (e.g. the engine died) is left alone this long before a retry.
RETRY_BACKOFF_SECONDS = 30.0


class Worker:
    def __init__(self, ctx: WorkerContext) -> None:
        self.ctx = ctx
        self._wake = asyncio.Event()
        # batch id -> its run and the task driving it
        self._runs: dict[str, tuple[BatchRun, asyncio.Task]] = {}
        self._retry_at: dict[str, float] = {}
        self._loop_task: asyncio.Task | None = None

    def wake(self, batch_id: str | None = None) -> None:
        """Look for work now (called after a batch is created or cancelled); a run of `batch_id`
        in this process re-reads its status at once instead of at its next poll."""
        self._wake.set()
        entry = self._runs.get(batch_id) if batch_id else None
        if entry is not None:
            entry[0].check_now()

    def start(self) -> None:
        self._loop_task = asyncio.create_task(self._loop())

    async def stop(self) -> None:
        if self._loop_task is not None:
            self._loop_task.cancel()
            with suppress(asyncio.CancelledError):
                await self._loop_task
        tasks = [task for _, task in self._runs.values()]
        for task in tasks:
            task.cancel()
        await asyncio.gather(*tasks, return_exceptions=True)

    async def _claim(self) -> Claim | None:
        now = time.time()
        self._retry_at = {batch_id: at for batch_id, at in self._retry_at.items() if at > now}
        async with self.ctx.db.write() as session:
            return await BatchRepository(session).claim(
                self.ctx.owner, now, self.ctx.settings.lease_seconds, [*self._runs, *self._retry_at]
            )

    async def _loop(self) -> None:
        while True:
            try:
                while len(self._runs) < self.ctx.settings.max_concurrent_batches:
                    claim = await self._claim()
                    if claim is None:
                        break
                    run = BatchRun(self.ctx, claim)
                    self._runs[claim.batch_id] = (run, asyncio.create_task(self._run(run)))
            except Exception:  # noqa: BLE001 - e.g. a busy database; try again shortly
                log.warning("claiming batches failed", exc_info=True)
            with suppress(asyncio.TimeoutError):
                await asyncio.wait_for(self._wake.wait(), IDLE_POLL_SECONDS)
            self._wake.clear()

    async def _run(self, run: BatchRun) -> None:
        claim = run.claim
        try:
            await run.run()
        except asyncio.CancelledError:
            raise
        except Exception:
            log.exception("batch %s stopped with an error; retrying in %.0f s", claim.batch_id,
                          RETRY_BACKOFF_SECONDS)
            self._retry_at[claim.batch_id] = time.time() + RETRY_BACKOFF_SECONDS
        finally:
            self._runs.pop(claim.batch_id, None)
            self.wake()
