"""Every status a stored object can have, and the named groups of them the code decides by.

They are StrEnums: a member is its string (it compares, hashes, formats and serialises as its
value), so the wire and the database see exactly the strings OpenAI's API uses, and the database
holds a CHECK constraint built from the same values (migrations/versions/0007_status_checks.py)."""

from __future__ import annotations

from collections.abc import Iterable
from enum import StrEnum


class BatchStatus(StrEnum):
    """A batch's lifecycle, as OpenAI's Batch object names it."""

    VALIDATING = "validating"
    FAILED = "failed"
    IN_PROGRESS = "in_progress"
    FINALIZING = "finalizing"
    COMPLETED = "completed"
    EXPIRED = "expired"
    CANCELLING = "cancelling"
    CANCELLED = "cancelled"


class ExportStatus(StrEnum):
    """A batch's export of its files to its `output_uri` / `output_urls` (batchd's results by
    reference); a batch without one has none (NULL)."""

    PENDING = "pending"
    COMPLETED = "completed"
    FAILED = "failed"


# Still moving: its input file is in use and it counts against the project's quota.
ACTIVE_BATCH_STATUSES = (
    BatchStatus.VALIDATING,
    BatchStatus.IN_PROGRESS,
    BatchStatus.FINALIZING,
    BatchStatus.CANCELLING,
)
# Ended: nothing changes it any more (a cancel is refused).
TERMINAL_BATCH_STATUSES = (BatchStatus.COMPLETED, BatchStatus.FAILED, BatchStatus.EXPIRED, BatchStatus.CANCELLED)
# A cancel request moves these to cancelling.
CANCELLABLE_BATCH_STATUSES = (BatchStatus.VALIDATING, BatchStatus.IN_PROGRESS, BatchStatus.FINALIZING)
# Past its expiry, a batch in one of these is expired rather than moved on.
EXPIRABLE_BATCH_STATUSES = (BatchStatus.VALIDATING, BatchStatus.IN_PROGRESS)

# Every status a batch may move to from each one (BatchRepository refuses any other move): on
# through its steps, to cancelling on a cancel, to expired past its expiry, to failed when
# refused at validation or dead-lettered (app/worker/dead_letter.py). An ending moves nowhere.
BATCH_MOVES: dict[BatchStatus, frozenset[BatchStatus]] = {
    BatchStatus.VALIDATING: frozenset(
        {BatchStatus.IN_PROGRESS, BatchStatus.FAILED, BatchStatus.CANCELLING, BatchStatus.EXPIRED}
    ),
    BatchStatus.IN_PROGRESS: frozenset(
        {BatchStatus.FINALIZING, BatchStatus.FAILED, BatchStatus.CANCELLING, BatchStatus.EXPIRED}
    ),
    BatchStatus.FINALIZING: frozenset({BatchStatus.COMPLETED, BatchStatus.FAILED, BatchStatus.CANCELLING}),
    BatchStatus.CANCELLING: frozenset({BatchStatus.CANCELLED, BatchStatus.FAILED}),
    **{status: frozenset() for status in TERMINAL_BATCH_STATUSES},
}


class ForbiddenBatchMove(ValueError):
    """A status change BATCH_MOVES does not allow: a mistake in the code, never the caller's."""


def batch_moves_from(target: BatchStatus, statuses: Iterable[BatchStatus] | None = None) -> tuple[BatchStatus, ...]:
    """The statuses a batch moves to `target` from: `statuses` (each checked against BATCH_MOVES,
    ForbiddenBatchMove if one may not), or all that may when None."""
    if statuses is None:
        return tuple(status for status in BatchStatus if target in BATCH_MOVES[status])
    statuses = tuple(statuses)
    refused = [status for status in statuses if target not in BATCH_MOVES[status]]
    if refused or not statuses:
        raise ForbiddenBatchMove(
            f"A batch may not move to {target} from {', '.join(refused) or 'no status'} (app/core/statuses.py BATCH_MOVES)."
        )
    return statuses


class LineOutcome(StrEnum):
    """How a batch line ended, as `request_counts` counts it (and the lines-finished metric)."""

    COMPLETED = "completed"
    FAILED = "failed"


class ShardStatus(StrEnum):
    """A slice of a batch's lines: waiting for a replica, held by one under a lease, or done."""

    PENDING = "pending"
    RUNNING = "running"
    DONE = "done"


class EngineState(StrEnum):
    """A served model's engine, as `GET /v1/models` and the dashboard show it (and `/health` says
    `starting` until every engine is up)."""

    STARTING = "starting"
    READY = "ready"
    DEAD = "dead"  # its engine core died, or none of its upstream URLs is in the rotation
    UNLOADED = "unloaded"  # served on demand: no engine now, one is loaded when its lines are due
    STOPPED = "stopped"  # not served (or no longer)


class UpstreamState(StrEnum):
    """One upstream URL of a model, as its `GET /models` probe found it."""

    UP = "up"
    DOWN = "down"
    NO_MODEL = "no_model"  # it answers, but does not serve the model


class UploadStatus(StrEnum):
    """A multipart upload, as OpenAI's Upload object names it; only a pending one takes parts."""

    PENDING = "pending"
    COMPLETED = "completed"
    CANCELLED = "cancelled"
    EXPIRED = "expired"


class WebhookEndpointStatus(StrEnum):
    """Whether an endpoint receives events (disabled by its owner, or by batchd after failing)."""

    ENABLED = "enabled"
    DISABLED = "disabled"


class WebhookDeliveryStatus(StrEnum):
    """One event to one endpoint: retried while pending, then delivered or given up (failed)."""

    PENDING = "pending"
    DELIVERED = "delivered"
    FAILED = "failed"


class WebhookEventType(StrEnum):
    """The events a webhook endpoint can subscribe to: a batch, or a background response, reached
    this ending (OpenAI's names)."""

    BATCH_COMPLETED = "batch.completed"
    BATCH_FAILED = "batch.failed"
    BATCH_CANCELLED = "batch.cancelled"
    BATCH_EXPIRED = "batch.expired"
    RESPONSE_COMPLETED = "response.completed"
    RESPONSE_FAILED = "response.failed"
    RESPONSE_CANCELLED = "response.cancelled"
    RESPONSE_INCOMPLETE = "response.incomplete"

    @classmethod
    def of_ending(cls, ending: BatchStatus) -> WebhookEventType:
        """The event sent when a batch ends in ``ending`` (a terminal status)."""
        return cls(f"batch.{ending.value}")


class MessageBatchStatus(StrEnum):
    """An Anthropic Message Batch's `processing_status` (its view of the same batch)."""

    IN_PROGRESS = "in_progress"
    CANCELING = "canceling"
    ENDED = "ended"


class MessageResultType(StrEnum):
    """The `result.type` of one request of an Anthropic Message Batch."""

    SUCCEEDED = "succeeded"
    ERRORED = "errored"
    CANCELED = "canceled"
    EXPIRED = "expired"


class ResponseStatus(StrEnum):
    """A background response's `status`, as OpenAI's Response object names it (its view of the
    one-line batch that runs it)."""

    QUEUED = "queued"
    IN_PROGRESS = "in_progress"
    COMPLETED = "completed"
    FAILED = "failed"
    CANCELLED = "cancelled"
    INCOMPLETE = "incomplete"
