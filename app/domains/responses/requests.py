"""The single requests list (`GET /v1/queue/requests`): the project's background responses and
flex requests, newest first, each one-line batch as its lane, OpenAI Response status, latency
and tokens (the dashboard's Requests page).

A completed background response is `completed` or `incomplete` as the engine's body says, so its
result line is read (one small read each, as its retrieve does); a flex request's result is gone
once it is answered, and the row alone says how it ended."""

from __future__ import annotations

from sqlalchemy.ext.asyncio import AsyncSession

from app.core.batch_kinds import BatchApi, kind_of
from app.core.statuses import TERMINAL_BATCH_STATUSES, BatchStatus, ResponseStatus
from app.db.models import Batch
from app.db.repositories.base import UnknownCursor
from app.domains.lookup import SINGLE_REQUEST
from app.domains.responses.list_schemas import SingleRequest, SingleRequestUsage
from app.domains.responses.one_line import result_of
from app.domains.responses.requests_repository import SingleRequestRepository
from app.domains.responses.view import answered_status, running_status
from app.schemas.common import ListPage
from app.storage.base import BlobStore


def request_status(batch: Batch, started: bool) -> ResponseStatus:
    """The request's status in OpenAI's Response words, from its batch row alone: an ended
    batch is `completed` when its line is, `failed` otherwise (refused, failed, expired)."""
    status = running_status(batch.status, started)
    if status is not None:
        return status
    if batch.status == BatchStatus.COMPLETED and batch.completed > 0:
        return ResponseStatus.COMPLETED
    return ResponseStatus.FAILED


def ended_at(batch: Batch) -> int | None:
    if batch.status not in TERMINAL_BATCH_STATUSES:
        return None
    return batch.completed_at or batch.failed_at or batch.expired_at or batch.cancelled_at


def single_request(batch: Batch, status: ResponseStatus) -> SingleRequest:
    end = ended_at(batch)
    lane = kind_of(batch.api).lane
    assert lane is not None, "the list holds single requests only (repositories/single_requests.py)"
    return SingleRequest(
        id=batch.id,
        lane=lane,
        status=status,
        model=batch.model,
        endpoint=batch.endpoint,
        created_at=batch.created_at,
        ended_at=end,
        seconds=None if end is None else max(0, end - batch.created_at),
        usage=SingleRequestUsage(
            input_tokens=batch.input_tokens,
            output_tokens=batch.output_tokens,
            total_tokens=batch.input_tokens + batch.output_tokens,
        ),
    )


async def list_single_requests(
    session: AsyncSession, store: BlobStore, project: str, *, after: str | None, limit: int
) -> ListPage[SingleRequest]:
    """A page of the project's single requests, newest first (the cursor: an id of the list)."""
    repo = SingleRequestRepository(session)
    try:
        page = await repo.page(project, after=after, limit=limit)
    except UnknownCursor:
        raise SINGLE_REQUEST.not_found(after, param="after") from None
    running = [b.id for b in page.items if b.status == BatchStatus.IN_PROGRESS]
    started = await repo.started(running)
    items = []
    for batch in page.items:
        status = request_status(batch, batch.id in started)
        if status == ResponseStatus.COMPLETED and batch.api == BatchApi.RESPONSE:
            status = answered_status(await result_of(session, store, batch))
        items.append(single_request(batch, status))
    return ListPage.of(items, page.has_more)
