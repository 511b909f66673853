"""The in-process worker. It claims two kinds of work from the shared database: batches with a
step one replica must take alone (validate, finalize, cancel, expire: batch_run.py), and shards
of running batches (shard_run.py), which any replica runs. Postgres is the only coordinator.

Drain (SIGTERM) stops claiming, aborts in-flight engine requests, checkpoints what finished and
releases every lease at once, so other replicas pick the work up without waiting for expiry."""

from __future__ import annotations

import asyncio
import logging
import math
import time
from collections.abc import AsyncIterator
from contextlib import suppress

from app.core.metrics import record_lease_takeover
from app.core.worker_port import GateLoad, QueueSnapshot
from app.db.repositories.batches import BatchRepository, Claim
from app.db.repositories.queue import QueueRepository
from app.db.repositories.shards import ShardClaim, ShardRepository
from app.scheduling.admission import ShardHere, Slots, shard_slots
from app.scheduling.state import RunningShard
from app.worker.batch_run import BatchRun
from app.worker.context import WorkerContext
from app.worker.dead_letter import FailureCounts, dead_letter
from app.worker.shard_run import ShardRun, ShardStart, shard_start

log = logging.getLogger("batchd.worker")

# Batches created through this replica wake the worker at once; the poll picks up work from
# other replicas (their batches and shards, expired leases), so it need not be fast. A shard
# that ends here wakes the worker for shards only: its batch's next step is claimed by the run
# that ends the last shard (_finalize_now), and other batches' steps wait for a wake or the poll
# (a batch claim at every shard's end was a write transaction a shard, a tenth of W8's).
IDLE_POLL_SECONDS = 1.0


class Worker:
    def __init__(self, ctx: WorkerContext) -> None:
        self.ctx = ctx
        self._wake = asyncio.Event()
        self._batch_steps_due = True  # look for batch steps at the loop's next turn
        self._batch_poll_at = 0.0  # ... and at this time.monotonic() at the latest
        # batch id -> its run and the task driving it (one-replica steps)
        self._batches: dict[str, tuple[BatchRun, asyncio.Task]] = {}
        # shard id -> its run and task, and what admission needs to know of it
        self._shards: dict[int, tuple[ShardRun, asyncio.Task]] = {}
        self._here: dict[int, ShardHere] = {}
        # (model, project) -> when its last shard here ended: who has waited longest goes first
        self._waited_since: dict[tuple[str | None, str], float] = {}
        self._retry_at: dict[str, float] = {}
        self._failures = FailureCounts()  # each batch's failures in a row: the dead letter
        self._finalizing: set[asyncio.Task] = set()  # _finalize_now claims (a reference keeps each alive)
        self._loop_task: asyncio.Task | None = None
        self._schedule_task: asyncio.Task | None = None
        self._draining = False

    def wake(self, batch_id: str | None = None) -> None:
        """Look for work now (called after a batch is created or cancelled); shards of `batch_id`
        running here re-read its status at once instead of at their next poll."""
        self._batch_steps_due = True
        self._wake.set()
        for run, _ in list(self._shards.values()):
            if run.claim.batch_id == batch_id:
                run.check_now()

    # WorkerPort (app/core/worker_port.py): what the API may ask
    def queue_snapshot(self) -> QueueSnapshot:
        schedule, gates = self.ctx.schedule, self.ctx.gates
        loads = {model: load for model in gates if (load := self.gate_load(model)) is not None}
        return QueueSnapshot(schedule.rates(), schedule.at_risk_ids, schedule.weights(), loads, schedule.served)

    def gate_load(self, model: str) -> GateLoad | None:
        gate = self.ctx.gates.get(model)
        return None if gate is None else GateLoad(*gate.load(), gate.capacity)

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
        tasks += list(self._finalizing)
        await asyncio.gather(*tasks, return_exceptions=True)

    def _backing_off(self) -> list[str]:
        now = time.time()
        self._retry_at = {batch_id: at for batch_id, at in self._retry_at.items() if at > now}
        return list(self._retry_at)

    async def _claim_batch(self, idle_projects_only: bool, only: str | None = None) -> Claim | None:
        async with self.ctx.db.write() as session:
            claim = await BatchRepository(session).claim(
                self.ctx.owner,
                time.time(),
                self.ctx.settings.lease_seconds,
                [*self._batches, *self._backing_off()],
                idle_projects_only,
                only,
            )
        if claim is not None and claim.taken_over:
            record_lease_takeover()
        return claim

    def _start_batch(self, claim: Claim) -> None:
        run = BatchRun(self.ctx, claim)
        self._batches[claim.batch_id] = (run, asyncio.create_task(self._run(run, claim.batch_id)))

    async def _finalize_now(self, batch_id: str) -> None:
        """The replica that ran a batch's last shard finalizes it at once, not at the loop's next
        turn nor behind the validations that fill its batch steps (seconds on a busy replica: a
        small batch's output waited on them). Finalize streams, so one more costs little."""
        if self._draining:
            return
        try:
            claim = await self._claim_batch(False, only=batch_id)
        except Exception:  # noqa: BLE001 - the loop takes it on its next turn
            log.warning("claiming batch %s to finalize failed", batch_id, exc_info=True)
            return
        if claim is not None and not self._draining:
            self._start_batch(claim)

    def _slots(self, model: str | None) -> Slots:
        window = self.ctx.window(model) if model is not None else 1
        return shard_slots(self.ctx.settings.max_running_shards, window)

    async def _claim_shards(self) -> AsyncIterator[tuple[ShardClaim, ShardStart]]:
        """Shards to run, one at a time by app.scheduling.admission (fair share per model, shard
        slots sized by each engine), each after telling the shard it replaces, if any, to give way.
        One read of the queue serves every claim of a turn: on a busy host each database round
        trip waits for a CPU, and reading it again per shard made starting twenty teams' shards
        take seconds (bench W6 twenty)."""
        now = time.time()
        async with self.ctx.db.read() as session:
            queue = QueueRepository(session)
            candidates = await queue.claimable(now, self._backing_off())
            running = await queue.running_shards(now)
        while candidates:
            here = list(self._here.values())
            pick = self.ctx.schedule.next_pick(candidates, here, running, self._slots, self._waited_since)
            if pick is None:
                return
            candidate = pick.candidate
            async with self.ctx.db.write() as session:
                claim = await ShardRepository(session).claim(
                    self.ctx.owner,
                    time.time(),
                    self.ctx.settings.lease_seconds,
                    resumed_only=pick.resumed_only,
                    batch_id=candidate.batch_id,
                )
                # What the run starts from, in the claim's transaction (not one more of its own).
                start = await shard_start(session, claim) if claim is not None else None
            if claim is None:  # none of its shards left to claim (or to resume)
                candidates = [c for c in candidates if c.batch_id != candidate.batch_id]
                continue
            if claim.taken_over:
                record_lease_takeover()
                log.info("took over %s shard %d from an expired lease", claim.batch_id, claim.shard_no)
            if pick.replaces is not None and pick.replaces in self._shards:
                log.info("%s shard %d gives way to project %s", *self._describe(pick.replaces), candidate.project)
                self._shards[pick.replaces][0].give_way()
            self._here[claim.shard_id] = ShardHere(
                claim.shard_id, candidate.project, claim.batch_id, candidate.model, candidate.deadline, time.time()
            )
            running.append(RunningShard(candidate.project, candidate.model, self.ctx.owner, 1, claim.batch_id))
            assert start is not None
            yield claim, start

    def _describe(self, shard_id: int) -> tuple[str, int]:
        run = self._shards[shard_id][0]
        return run.claim.batch_id, run.claim.shard_no

    def _take_batch_steps_due(self, now: float) -> bool:
        """Whether this turn looks for batch steps: after a wake() or once a poll interval."""
        due = self._batch_steps_due or now >= self._batch_poll_at
        if due:
            self._batch_steps_due = False
            self._batch_poll_at = now + IDLE_POLL_SECONDS
        return due

    async def _loop(self) -> None:
        settings = self.ctx.settings
        while True:
            try:
                # Past max_concurrent_batches, only a project with no step running anywhere starts
                # one: one team's ten large files do not hold the others' small ones back.
                batch_steps = self._take_batch_steps_due(time.monotonic())
                while batch_steps and len(self._batches) < 2 * settings.max_concurrent_batches:
                    claim = await self._claim_batch(len(self._batches) >= settings.max_concurrent_batches)
                    if claim is None:
                        break
                    self._start_batch(claim)
                async for shard, start in self._claim_shards():
                    shard_run = ShardRun(self.ctx, shard, start)
                    self._shards[shard.shard_id] = (
                        shard_run,
                        asyncio.create_task(self._run(shard_run, shard.batch_id)),
                    )
            except Exception:  # noqa: BLE001 - e.g. a busy database; try again shortly
                log.warning("claiming work failed", exc_info=True)
                self._batch_steps_due = True
            # asyncio.timeout, not wait_for: Python 3.11's wait_for, cancelled as its inner wait
            # ended, once left this loop "cancelling" forever and a shutdown waiting on it (CI).
            with suppress(TimeoutError):
                async with asyncio.timeout(IDLE_POLL_SECONDS):
                    await self._wake.wait()
            self._wake.clear()

    async def _failed(self, batch_id: str, work: str, exc: Exception) -> None:
        """Retry the batch's work after Settings.retry_backoff_seconds (e.g. the engine died, the
        disk or the database failed), or end the batch once it failed max_step_failures times in
        a row (app/worker/dead_letter.py)."""
        settings = self.ctx.settings
        failures = self._failures.failed(batch_id, work, exc)
        if failures >= settings.max_step_failures:
            log.error("work on batch %s failed (%d times in a row)", batch_id, failures, exc_info=exc)
            # Claimed by no loop while it is ended: a claim meanwhile ran it once more (CI on
            # Postgres: 4 attempts of 3, the dead-letter's write outlasting the 0.05 s backoff).
            self._retry_at[batch_id] = math.inf
            try:
                if await dead_letter(self.ctx, batch_id, failures, exc):
                    self._failures.forget(batch_id)
                    self._retry_at.pop(batch_id, None)
                    return
            except Exception:  # noqa: BLE001 - e.g. the database failed too: retried below
                log.warning("could not end batch %s as failed", batch_id, exc_info=True)
        else:
            log.exception(
                "work on batch %s stopped with an error (%d of %d in a row); retrying in %.0f s",
                batch_id,
                failures,
                settings.max_step_failures,
                settings.retry_backoff_seconds,
            )
        self._retry_at[batch_id] = time.time() + settings.retry_backoff_seconds

    async def _run(self, run: BatchRun | ShardRun, batch_id: str) -> None:
        work = "shard" if isinstance(run, ShardRun) else "batch"
        try:
            await run.run()
            self._failures.forget(batch_id, work)
        except asyncio.CancelledError:
            raise
        except Exception as exc:
            await self._failed(batch_id, work, exc)
        finally:
            if isinstance(run, ShardRun):
                self._shards.pop(run.claim.shard_id, None)
                shard = self._here.pop(run.claim.shard_id, None)
                if shard is not None:
                    self._waited_since[(shard.model, shard.project)] = time.time()
                if run.finished_batch:
                    task = asyncio.create_task(self._finalize_now(batch_id))
                    self._finalizing.add(task)
                    task.add_done_callback(self._finalizing.discard)
                self._wake.set()  # for shards (see IDLE_POLL_SECONDS)
            else:
                self._batches.pop(batch_id, None)
                self.wake()
