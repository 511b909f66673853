"""Runs one claimed shard: reads only its byte range of the input, feeds its unfinished lines
through the engine window, checkpoints them, and marks the shard done. The replica that
finishes a batch's last shard moves the batch on to finalizing."""

from __future__ import annotations

import asyncio
import logging
import math
import time
from collections.abc import AsyncIterator
from contextlib import suppress

from sqlalchemy.ext.asyncio import AsyncSession

from app.core import tracing
from app.core.batch_kinds import kind_of
from app.core.endpoints import usage_kind
from app.core.statuses import BatchStatus, ShardStatus
from app.db.models import Batch
from app.db.repositories.batches import BatchRepository
from app.db.repositories.shards import ShardClaim, ShardRepository
from app.db.repositories.usage import UsageKey
from app.domains.limits.model_permissions import runner_for
from app.engine.protocol import LineRunner
from app.pipeline.cache_salt import SaltedRunner
from app.pipeline.executor import LineExecutor
from app.pipeline.fair_gate import Ticket
from app.pipeline.jsonl import split_lines
from app.pipeline.lines import InputLine, parse_input_line
from app.pipeline.ordering import GROUPED_ENDPOINTS, grouped_by_prefix
from app.worker.checkpoint import Checkpoint
from app.worker.context import WorkerContext
from app.worker.leases import holding_lease

log = logging.getLogger("batchd.worker")

# What a shard run starts from: its batch (None if gone) and the line numbers already recorded.
ShardStart = tuple[Batch | None, set[int]]

# How often a running shard flushes finished lines and checks for cancel/expiry. Each check is
# two short transactions on the API's event loop, which shares a CPU with the engine core, so
# not too often: a crash loses at most a second of lines, a cancel or expiry reaches every
# replica within about a second, and a cancel made through this replica's API does not wait
# for the poll (Worker.wake -> ShardRun.check_now).
POLL_SECONDS = 1.0


class ShardRun:
    def __init__(self, ctx: WorkerContext, claim: ShardClaim, start: ShardStart | None = None) -> None:
        self.ctx = ctx
        self.claim = claim
        self._start = start
        self._check_now = asyncio.Event()
        self._give_way = asyncio.Event()
        self.finished_batch = False  # this run moved its batch on to finalizing
        self._marked_done = False  # committed as done by this run: nothing left to release

    @property
    def what(self) -> str:
        return f"{self.claim.batch_id} shard {self.claim.shard_no}"

    def check_now(self) -> None:
        """Re-read the batch's status now (a cancel arrived through this replica's API)."""
        self._check_now.set()

    def give_way(self) -> None:
        """Start no more lines, let those in flight finish, checkpoint and give the shard back
        (admission gave its place to a project with no shard here)."""
        self._give_way.set()

    async def run(self) -> None:
        async with holding_lease(self._renew, self._release, self.ctx.settings.lease_seconds / 3, self.what):
            await self._execute()

    async def _renew(self) -> None:
        async with self.ctx.db.write() as session:
            await ShardRepository(session).heartbeat(self.claim, time.time(), self.ctx.settings.lease_seconds)

    async def _release(self) -> None:
        """Drain, cancel or a failure: hand the shard back at once, not at lease expiry (a shard
        already marked done is left as it is; one this run marked done needs no transaction)."""
        if self._marked_done:
            return
        async with self.ctx.db.write() as session:
            await ShardRepository(session).release(self.claim)

    async def _pending_lines(self, batch: Batch, done: set[int]) -> AsyncIterator[InputLine]:
        claim = self.claim
        chunks = self.ctx.store.read(batch.project, batch.shard_source, claim.start_offset, claim.end_offset)
        async for line_no, raw in split_lines(chunks, first_line_no=claim.first_line):
            if line_no not in done:
                line = parse_input_line(line_no, raw)
                if line is not None:
                    yield line

    async def _execute(self) -> None:
        """Run the shard's unfinished lines; mark it done once every line is checkpointed."""
        start, self._start = self._start, None
        if start is None:
            async with self.ctx.db.read() as session:
                start = await shard_start(session, self.claim)
        batch, done = start
        if batch is None or batch.status != BatchStatus.IN_PROGRESS:
            return
        claim = self.claim
        with tracing.batch_span(
            "batchd.shard",
            batch.traceparent,
            batch.id,
            project=batch.project,
            model=batch.model,
            shard=claim.shard_no,
            lines=claim.lines,
            pending_lines=claim.lines - len(done),
            retries=claim.fence - 1,  # earlier claims of this shard (drained, crashed, gave way)
            taken_over=claim.taken_over,
            replica=self.ctx.settings.replica_id,
        ) as span:
            outcome = await self._run_lines(batch, done)
            tracing.set_attributes(span, outcome=outcome)

    async def _run_lines(self, batch: Batch, done: set[int]) -> str:
        """Run the lines not yet done; how it ended (done, stopped, or lines left to run again)."""
        model = batch.model
        assert model is not None, "validation names a running batch's model"
        usage = UsageKey(batch.project, model, batch.id, usage_kind(batch.endpoint), batch.api_key_id)
        checkpoint = Checkpoint(self.ctx.db, self.ctx.store, batch.project, self.claim, usage, set(done))
        kind = kind_of(batch.api)
        # A flex request's line fails (its call answers 429) if no engine can start it within its wait.
        start_by = batch.created_at + self.ctx.settings.flex_wait_seconds if kind.waits_for_start else math.inf
        ticket = Ticket(batch.project, batch.id, float(batch.deadline), kind.lane is not None, start_by)
        # Every line with its project's cache_salt: no project shares another's cached prefixes.
        engine: LineRunner = SaltedRunner(self.ctx.registry, self.ctx.cache_salt(batch.project))
        # A Message Batch's requests are checked as they run (an OpenAI batch's lines were at
        # validation, but for a mixed-model batch's lines naming a model the project cannot use).
        if kind.lines_checked_as_they_run or batch.allow_mixed_models:
            engine = await runner_for(self.ctx.db, batch.project, engine)
        executor = LineExecutor(
            engine,
            self.ctx.window(model),
            lambda line_model: self.ctx.line_gate(line_model, model),
            ticket,
            self.ctx.settings.allow_tenant_priority,
        )
        stop = asyncio.Event()
        monitor = asyncio.create_task(self._monitor(batch, checkpoint, stop))
        finished = False
        try:
            lines = self._pending_lines(batch, done)
            if self._regroups(batch):
                lines = grouped_by_prefix(lines)
            finished = await executor.run(lines, checkpoint.add, stop, self._give_way)
        finally:
            monitor.cancel()
            with suppress(asyncio.CancelledError):
                await monitor
            # The run's last write also marks the shard done when it leaves every line recorded.
            self._marked_done = await checkpoint.flush(finish=finished)
        if not finished:
            return "interrupted"
        now = time.time()
        if not self._marked_done:  # the checkpoint lost count (a write of unknown outcome): count
            async with self.ctx.db.write() as session:
                shards = ShardRepository(session)
                recorded = await shards.count_lines(self.claim)
                if recorded >= self.claim.lines:
                    await shards.mark_done(self.claim, now)
            self._marked_done = recorded >= self.claim.lines
            if recorded < self.claim.lines:
                # A line whose result was not recorded runs again when the shard is next claimed.
                log.warning(
                    "%s: %d of %d lines recorded; running the rest again", self.what, recorded, self.claim.lines
                )
                return "unrecorded lines"
        finished_batch = checkpoint.finished_batch
        if finished_batch is None:
            # Its own transaction, after the shard's is committed: of two replicas ending a
            # batch's last two shards at once, the later sees both done and moves the batch on.
            async with self.ctx.db.write() as session:
                finished_batch = await BatchRepository(session).finish_running(batch.id, int(now))
        if finished_batch:
            log.info("batch %s: every shard done; finalizing", batch.id)
            self.finished_batch = True
        return ShardStatus.DONE

    def _regroups(self, batch: Batch) -> bool:
        """Whether the shard's lines are grouped by prompt prefix as they are read: lines with a
        prompt, of a batch with no prefix-ordered copy that may share one. A batch with a copy runs
        in its order already; an OpenAI batch of more than one shard without a copy shares no
        prefix (validation looked, app/worker/batch_run.py; or its spool failed), so no shard of
        it does. A Message Batch never has a copy; a batch of one shard is too small for one."""
        if batch.ordered_input is not None or batch.endpoint not in GROUPED_ENDPOINTS:
            return False
        return kind_of(batch.api).regroups_shards or batch.total <= self.ctx.settings.shard_lines

    async def _monitor(self, batch: Batch, checkpoint: Checkpoint, stop: asyncio.Event) -> None:
        """Flush finished lines and stop the run when the batch is cancelled or expires; give the
        shard back when the batch is paused (no replica claims it again until it is resumed)."""
        while not stop.is_set():
            with suppress(asyncio.TimeoutError):
                await asyncio.wait_for(self._check_now.wait(), POLL_SECONDS)
            self._check_now.clear()
            await checkpoint.flush()
            async with self.ctx.db.read() as session:
                status, paused = await BatchRepository(session).run_state(batch.id)
            if status != BatchStatus.IN_PROGRESS or time.time() >= batch.expires_at:
                stop.set()
            elif paused:  # start no more lines; those in flight finish and the shard goes back
                self._give_way.set()


async def shard_start(session: AsyncSession, claim: ShardClaim) -> ShardStart:
    """Read what a run of `claim` starts from; the claim's own transaction may read it, so a
    shard's start costs no transaction of its own. A shard's first claim (fence 1) has no
    recorded lines: only claims write them, each under its own fence."""
    batch = await BatchRepository(session).load(claim.batch_id)
    done = await ShardRepository(session).finished_line_numbers(claim) if claim.fence > 1 else set()
    return batch, done
