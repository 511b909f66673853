"""The in-process worker. It claims two kinds of work from the shared database: batches with a
step one replica must take alone (validate, finalize, cancel, expire: batch_run.py), and shards
of running batches (shard_run.py), which any replica runs. Postgres is the only coordinator.

Drain (SIGTERM) stops claiming, aborts in-flight engine requests, checkpoints what finished and
releases every lease at once, so other replicas pick the work up without waiting for expiry."""

from __future__ import annotations

import asyncio
import logging
import time
from collections import Counter
from contextlib import suppress

from app.core.metrics import record_lease_takeover
from app.db.repositories.batches import BatchRepository, Claim
from app.db.repositories.queue import QueueRepository
from app.db.repositories.shards import ShardClaim, ShardRepository
from app.worker.batch_run import BatchRun
from app.worker.context import WorkerContext
from app.worker.shard_run import ShardRun

log = logging.getLogger("batchd.worker")

# Batches created through this replica wake the worker at once; the poll picks up work from
# other replicas (their batches and shards, expired leases), so it need not be fast.
IDLE_POLL_SECONDS = 1.0
# A replica runs at most this many shards of one batch at once: two keep the engine busy
# while one shard drains its last lines, and leave the rest of the batch to other replicas.
SHARDS_PER_BATCH = 2
# A batch that goes ahead of others here (at risk, or due before another batch of its project
# running here) may run this many: the gates give it every slot they can, which its lines can
# fill only if it always has some waiting while some of its shards drain their last lines.
SHARDS_PER_URGENT_BATCH = 4
# Past max_running_shards a project may still start shards until it runs this many here: with
# two, one starts while the other ends, so the project never leaves the engine gate's queue
# (a project that does loses its turn to the others).
SHARDS_PER_PROJECT = 2


class Worker:
    def __init__(self, ctx: WorkerContext) -> None:
        self.ctx = ctx
        self._wake = asyncio.Event()
        # batch id -> its run and the task driving it (one-replica steps)
        self._batches: dict[str, tuple[BatchRun, asyncio.Task]] = {}
        # shard id -> its run and task, and its batch's project
        self._shards: dict[int, tuple[ShardRun, asyncio.Task]] = {}
        self._shard_projects: dict[int, tuple[str, int]] = {}  # shard id -> (project, deadline)
        self._retry_at: dict[str, float] = {}
        self._loop_task: asyncio.Task | None = None
        self._schedule_task: asyncio.Task | None = None
        self._draining = False

    def wake(self, batch_id: str | None = None) -> None:
        """Look for work now (called after a batch is created or cancelled); shards of `batch_id`
        running here re-read its status at once instead of at their next poll."""
        self._wake.set()
        for run, _ in list(self._shards.values()):
            if run.claim.batch_id == batch_id:
                run.check_now()

    def start(self) -> None:
        self._loop_task = asyncio.create_task(self._loop())
        self._schedule_task = asyncio.create_task(self.ctx.schedule.run_forever())

    def drain(self) -> None:
        """Stop claiming and wind every run down (each checkpoints and releases its lease)."""
        if self._draining:
            return
        self._draining = True
        log.warning("draining: releasing %d shards and %d batches", len(self._shards), len(self._batches))
        for loop in (self._loop_task, self._schedule_task):
            if loop is not None:
                loop.cancel()
        for _, task in [*self._batches.values(), *self._shards.values()]:
            task.cancel()

    async def stop(self) -> None:
        self.drain()
        tasks = [task for _, task in [*self._batches.values(), *self._shards.values()]]
        tasks += [loop for loop in (self._loop_task, self._schedule_task) if loop is not None]
        await asyncio.gather(*tasks, return_exceptions=True)

    def _backing_off(self) -> list[str]:
        now = time.time()
        self._retry_at = {batch_id: at for batch_id, at in self._retry_at.items() if at > now}
        return list(self._retry_at)

    async def _claim_batch(self) -> Claim | None:
        async with self.ctx.db.write() as session:
            claim = await BatchRepository(session).claim(
                self.ctx.owner, time.time(), self.ctx.settings.lease_seconds, [*self._batches, *self._backing_off()]
            )
        if claim is not None and claim.taken_over:
            record_lease_takeover()
        return claim

    async def _claim_shard(self, over_limit: bool) -> ShardClaim | None:
        """The next shard in fair-share order (Schedule.claim_order), at most SHARDS_PER_BATCH of
        one batch here (batches share the engine, replicas share a batch; an urgent batch
        SHARDS_PER_URGENT_BATCH) unless it is a shard another replica gave back or abandoned, so
        it resumes at once. `over_limit`: this replica already runs its max_running_shards, so
        only a shard that goes ahead of what runs here may start, at once, rather than after some
        other shard ends: of a project that runs fewer than SHARDS_PER_PROJECT here, or of an
        urgent batch that runs fewer than that here."""
        running = Counter(run.claim.batch_id for run, _ in self._shards.values())
        projects_here = Counter(project for project, _ in self._shard_projects.values())
        latest_here: dict[str, int] = {}  # the latest deadline among each project's shards here
        for project, deadline in self._shard_projects.values():
            latest_here[project] = max(deadline, latest_here.get(project, deadline))
        schedule = self.ctx.schedule
        now = time.time()
        async with self.ctx.db.read() as session:
            queue = QueueRepository(session)
            candidates = await queue.claimable(now, self._backing_off())
            shards_running = await queue.running_shards(now)
        for candidate in schedule.claim_order(candidates, shards_running):
            urgent = schedule.at_risk(candidate.batch_id) or candidate.expires_at < latest_here.get(
                candidate.project, candidate.expires_at
            )
            limit = SHARDS_PER_URGENT_BATCH if urgent else SHARDS_PER_BATCH
            at_limit = running[candidate.batch_id] >= limit
            if at_limit and not candidate.resumed:
                continue
            ahead = projects_here[candidate.project] < SHARDS_PER_PROJECT or (
                urgent and running[candidate.batch_id] < SHARDS_PER_PROJECT
            )
            if over_limit and not ahead:
                continue
            async with self.ctx.db.write() as session:
                claim = await ShardRepository(session).claim(
                    self.ctx.owner,
                    time.time(),
                    self.ctx.settings.lease_seconds,
                    resumed_only=at_limit,
                    batch_id=candidate.batch_id,
                )
            if claim is not None:
                if claim.taken_over:
                    record_lease_takeover()
                    log.info("took over %s shard %d from an expired lease", claim.batch_id, claim.shard_no)
                self._shard_projects[claim.shard_id] = (candidate.project, candidate.expires_at)
                return claim
        return None

    async def _loop(self) -> None:
        settings = self.ctx.settings
        while True:
            try:
                while len(self._batches) < settings.max_concurrent_batches:
                    claim = await self._claim_batch()
                    if claim is None:
                        break
                    run = BatchRun(self.ctx, claim)
                    self._batches[claim.batch_id] = (run, asyncio.create_task(self._run(run, claim.batch_id)))
                # Past max_running_shards only shards that go ahead of those running (_claim_shard).
                while len(self._shards) < 2 * settings.max_running_shards:
                    shard = await self._claim_shard(over_limit=len(self._shards) >= settings.max_running_shards)
                    if shard is None:
                        break
                    shard_run = ShardRun(self.ctx, shard)
                    self._shards[shard.shard_id] = (
                        shard_run,
                        asyncio.create_task(self._run(shard_run, shard.batch_id)),
                    )
            except Exception:  # noqa: BLE001 - e.g. a busy database; try again shortly
                log.warning("claiming work failed", exc_info=True)
            with suppress(asyncio.TimeoutError):
                await asyncio.wait_for(self._wake.wait(), IDLE_POLL_SECONDS)
            self._wake.clear()

    async def _run(self, run: BatchRun | ShardRun, batch_id: str) -> None:
        try:
            await run.run()
        except asyncio.CancelledError:
            raise
        except Exception:
            # Settings.retry_backoff_seconds: e.g. the engine died, the disk or the database failed.
            backoff = self.ctx.settings.retry_backoff_seconds
            log.exception("work on batch %s stopped with an error; retrying in %.0f s", batch_id, backoff)
            self._retry_at[batch_id] = time.time() + backoff
        finally:
            if isinstance(run, ShardRun):
                self._shards.pop(run.claim.shard_id, None)
                self._shard_projects.pop(run.claim.shard_id, None)
            else:
                self._batches.pop(batch_id, None)
            self.wake()
