"""The dead letter: a batch whose work keeps failing ends `failed` instead of being retried
every `retry_backoff_seconds` forever.

Each replica counts the failures of a batch's work in a row (its one-replica steps and its
shards alike; any run that ends without an error starts the count again). At
`max_step_failures` the batch ends `failed`, its `errors.data` saying why (code
`processing_failed`, the step and the error's kind; the traceback is in the server's log).

Not counted: an engine that could not run lines (it died, an upstream fleet is unreachable, it
is not started yet: the lines run once it is back, or the batch expires) and a database that
cannot be reached or is busy (nothing about the batch; the dead letter could not be written
either). Those are retried as before."""

from __future__ import annotations

import logging
import time

from app.core.batch_kinds import kind_of
from app.core.line_errors import LineErrorCode, batch_error
from app.core.statuses import TERMINAL_BATCH_STATUSES, BatchStatus
from app.db.outages import is_database_busy, is_database_unreachable
from app.db.repositories.batches import BatchRepository
from app.db.repositories.shards import ShardRepository
from app.domains.webhooks.outbox import enqueue_batch_event
from app.engine.errors import EngineError
from app.worker.context import WorkerContext

log = logging.getLogger("batchd.worker")

# What each status's work is called in the batch's error.
_STEPS = {
    BatchStatus.VALIDATING: "validation",
    BatchStatus.IN_PROGRESS: "run",
    BatchStatus.FINALIZING: "finalization",
    BatchStatus.CANCELLING: "cancellation",
}


def counts_against_the_batch(exc: BaseException) -> bool:
    """Whether a failure of the batch's work counts towards its dead letter (see the module)."""
    return not (isinstance(exc, EngineError) or is_database_unreachable(exc) or is_database_busy(exc))


class FailureCounts:
    """Failures in a row of each batch's work on this replica, its batch steps and its shards
    counted apart: a batch step that goes well between two failed runs of a shard does not start
    the shard's count again (under load the two interleave, and the count never reached the limit)."""

    def __init__(self) -> None:
        self._counts: dict[tuple[str, str], int] = {}

    def failed(self, batch_id: str, work: str, exc: BaseException) -> int:
        """Count a failure of the batch's `work` ("batch" or "shard"; one that does not count
        leaves the count as it is); the count now."""
        key = (batch_id, work)
        if counts_against_the_batch(exc):
            self._counts[key] = self._counts.get(key, 0) + 1
        return self._counts.get(key, 0)

    def forget(self, batch_id: str, work: str | None = None) -> None:
        """The batch's `work` went well (None: the batch ended): its count starts again."""
        for key in [k for k in self._counts if k[0] == batch_id and work in (None, k[1])]:
            del self._counts[key]


async def dead_letter(ctx: WorkerContext, batch_id: str, failures: int, exc: BaseException) -> bool:
    """End the batch `failed` after `failures` failures in a row, the last `exc`; False if it had
    ended already (or moved on meanwhile)."""
    async with ctx.db.write() as session:
        batches = BatchRepository(session)
        batch = await batches.load(batch_id)
        if batch is None or batch.status in TERMINAL_BATCH_STATUSES:
            return False
        step = _STEPS.get(batch.status, "processing")
        message = (
            f"The batch's {step} failed {failures} times in a row ({type(exc).__name__}), so it is not "
            "retried again; the server's log has the details."
        )
        errors = [batch_error(LineErrorCode.PROCESSING_FAILED, message)]
        if not await batches.fail_unfinished(batch_id, batch.status, int(time.time()), errors):
            return False
        await ShardRepository(session).seal(batch_id)  # no shard of it runs again
        # As a batch refused at validation: a flex request's caller reads the row, no webhook.
        event = kind_of(batch.api).failed_event
        if event is not None:
            await enqueue_batch_event(session, batch_id, batch.project, event)
    log.error("batch %s failed: its %s failed %d times in a row; it is not retried again", batch_id, step, failures)
    return True
