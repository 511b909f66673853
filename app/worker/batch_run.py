"""Takes a claimed batch through the steps one replica must take alone: validating (which cuts
the input into shards) -> in_progress, and from there to its ending once its shards are done,
or it is cancelled or expires. The lines themselves run as shards (shard_run.py) on any replica.
Every step re-reads the batch, so a restart resumes wherever the last one stopped."""

from __future__ import annotations

import logging
import time

from app.core import tracing
from app.core.batch_kinds import kind_of
from app.core.faults import fault_point
from app.core.statuses import EXPIRABLE_BATCH_STATUSES, TERMINAL_BATCH_STATUSES, BatchStatus
from app.db.models import Batch
from app.db.repositories.batches import BatchRepository, Claim
from app.db.repositories.shards import ShardRepository
from app.domains.batches.validation import BatchInputValidator
from app.domains.webhooks.outbox import enqueue_batch_event
from app.pipeline.prefix_order import PrefixOrder
from app.pipeline.shards import cut_shards
from app.pipeline.validation import ValidationResult
from app.worker.context import WorkerContext
from app.worker.finalize import finalize
from app.worker.leases import holding_lease
from app.worker.ordered_input import delete_ordered_input, wants_order, write_ordered_input

log = logging.getLogger("batchd.worker")


class BatchRun:
    def __init__(self, ctx: WorkerContext, claim: Claim) -> None:
        self.ctx = ctx
        self.claim = claim

    async def _load(self) -> Batch | None:
        async with self.ctx.db.read() as session:
            return await BatchRepository(session).load(self.claim.batch_id)

    async def run(self) -> None:
        async with holding_lease(self._renew, self._release, self.ctx.settings.lease_seconds / 3, self.claim.batch_id):
            await self._drive()

    async def _renew(self) -> None:
        async with self.ctx.db.write() as session:
            await BatchRepository(session).heartbeat(self.claim, time.time(), self.ctx.settings.lease_seconds)

    async def _release(self) -> None:
        async with self.ctx.db.write() as session:
            await BatchRepository(session).release(self.claim)

    async def _drive(self) -> None:
        while True:
            batch = await self._load()
            if batch is None or batch.status in TERMINAL_BATCH_STATUSES:
                return
            expired = time.time() >= batch.expires_at
            if batch.status in EXPIRABLE_BATCH_STATUSES and expired:
                await self._finalize(await self._sealed(batch), BatchStatus.EXPIRED)
            elif batch.status == BatchStatus.VALIDATING:
                await self._validate(batch)
            elif batch.status == BatchStatus.IN_PROGRESS:
                if not await self._finish_running(batch):
                    return  # shards are still running; the replica that ends the last one moves on
            elif batch.status == BatchStatus.FINALIZING:
                await self._finalize(batch, BatchStatus.COMPLETED)
            elif batch.status == BatchStatus.CANCELLING:
                await self._finalize(await self._sealed(batch), BatchStatus.CANCELLED)

    async def _finalize(self, batch: Batch, ending: BatchStatus) -> None:
        with tracing.batch_span(
            "batchd.finalize",
            batch.traceparent,
            batch.id,
            project=batch.project,
            model=batch.model,
            ending=str(ending),
            completed=batch.completed,
            failed=batch.failed,
            replica=self.ctx.settings.replica_id,
        ):
            await finalize(self.ctx, self.claim, batch, ending)

    async def _sealed(self, batch: Batch) -> Batch:
        """Fence every unfinished shard off (a stale runner writes nothing more), then re-read
        the counters those runners left."""
        async with self.ctx.db.write() as session:
            await ShardRepository(session).seal(batch.id)
        return await self._load() or batch

    async def _validate(self, batch: Batch) -> None:
        with tracing.batch_span(
            "batchd.validate",
            batch.traceparent,
            batch.id,
            project=batch.project,
            endpoint=batch.endpoint,
            replica=self.ctx.settings.replica_id,
        ) as span:
            result = await self._validated(batch)
            tracing.set_attributes(span, model=result.model, lines=result.total, errors=len(result.errors))

    async def _validated(self, batch: Batch) -> ValidationResult:
        """Validate the input; the batch moves on to in_progress (cut into shards) or failed."""
        settings = self.ctx.settings
        kind = kind_of(batch.api)
        order = PrefixOrder(self.ctx.data_dir) if wants_order(batch, kind) else None
        validator = BatchInputValidator(self.ctx.db, settings, self.ctx.store, self.ctx.registry)
        try:
            validated = await validator.validate(
                batch.project,
                batch.input_file_id,
                batch.endpoint,
                kind=kind,
                order=order,
                mixed_models=batch.allow_mixed_models,
            )
            result = validated.result
            ordered_input, spans = None, result.shards.spans() if result.shards else []
            # A spool that failed (a full disk) costs the order, not the batch; lines that share
            # no prefix gain nothing from it (W8's chat lines: the copy was 3 % of the run).
            if (
                order is not None
                and order.spool_error is None
                and not result.errors
                and len(order) > settings.shard_lines
                and order.shares_prefixes()
            ):
                ordered_input, spans = await write_ordered_input(self.ctx.store, batch, order, settings.shard_lines)
        finally:
            if order is not None:
                order.close()
        await fault_point("validating", self.ctx.data_dir)
        now = int(time.time())
        started = False
        async with self.ctx.db.write() as session:
            await validated.admit(session, batch.id)
            if result.errors:
                failed = await BatchRepository(session).transition(
                    self.claim,
                    (BatchStatus.VALIDATING,),  # only from here: a cancel that came meanwhile wins
                    status=BatchStatus.FAILED,
                    failed_at=now,
                    errors=result.errors,
                    model=result.model,
                )
                # A background response sends response.failed; a flex request's caller gets its
                # answer from the call, no webhook.
                if failed and kind.failed_event is not None:
                    await enqueue_batch_event(session, batch.id, batch.project, kind.failed_event)
            elif await BatchRepository(session).transition(
                self.claim,
                status=BatchStatus.IN_PROGRESS,
                in_progress_at=now,
                total=result.total,
                model=result.model,
                prompt_tokens=result.prompt_tokens,
                ordered_input=ordered_input,
            ):
                await ShardRepository(session).add_all(batch.id, spans)
                started = True
        if ordered_input is not None and not started:  # refused, or cancelled meanwhile
            await delete_ordered_input(self.ctx.store, batch, ordered_input)
        return result

    async def _finish_running(self, batch: Batch) -> bool:
        """Move a batch whose shards are all done on to finalizing (normally the replica that ran
        the last shard has done it). A batch that started before shards existed gets its shards."""
        async with self.ctx.db.read() as session:
            has_shards = await ShardRepository(session).count(batch.id) > 0
        if not has_shards:
            spans = await cut_shards(
                self.ctx.store.read(batch.project, batch.input_file_id), self.ctx.settings.shard_lines
            )
            async with self.ctx.db.write() as session:
                if await BatchRepository(session).transition(
                    self.claim, (BatchStatus.IN_PROGRESS,), in_progress_at=batch.in_progress_at
                ):
                    await ShardRepository(session).add_all(batch.id, spans)
            return False
        async with self.ctx.db.write() as session:
            return await BatchRepository(session).finish_running(batch.id, int(time.time()))
