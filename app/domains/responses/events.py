"""The `response.*` webhook events (OpenAI's names) a background response sends when it ends,
instead of the `batch.*` ones of the one-line batch underneath: `response.completed`,
`response.incomplete` (the engine answered 200 with `status: "incomplete"`), `response.failed`
(the line failed, could not run, or expired) and `response.cancelled`."""

from __future__ import annotations

from app.core import jsonbody
from app.core.statuses import BatchStatus, ResponseStatus, WebhookEventType
from app.db.models import Batch
from app.domains.responses.view import answered_status
from app.pipeline.jsonl import split_lines
from app.pipeline.lines import ResultLine
from app.storage.base import BlobStore

_EVENTS = {
    ResponseStatus.COMPLETED: WebhookEventType.RESPONSE_COMPLETED,
    ResponseStatus.INCOMPLETE: WebhookEventType.RESPONSE_INCOMPLETE,
    ResponseStatus.FAILED: WebhookEventType.RESPONSE_FAILED,
}


async def ending_event(
    store: BlobStore, batch: Batch, ending: BatchStatus, output_file_id: str | None, error_file_id: str | None
) -> WebhookEventType:
    """The event of a response whose batch ends in `ending` with these result files (their blobs
    committed): for a completed batch, as its one result line says (the view's rule)."""
    if ending == BatchStatus.CANCELLED:
        return WebhookEventType.RESPONSE_CANCELLED
    if ending != BatchStatus.COMPLETED:
        return WebhookEventType.RESPONSE_FAILED
    for file_id in (output_file_id, error_file_id):
        if file_id is None:
            continue
        async for _, raw in split_lines(store.read(batch.project, file_id)):
            if raw.strip():
                return _EVENTS[answered_status(ResultLine.of(jsonbody.loads(raw)))]
    return WebhookEventType.RESPONSE_FAILED
