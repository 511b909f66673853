"""Anthropic Message Batches routes (`/v1/messages/batches`): the `anthropic` client's
`client.messages.batches.*`. Keys go in `x-api-key` (or `Authorization: Bearer`); errors are
rendered in Anthropic's envelope (app/http/error_handlers.py)."""

from __future__ import annotations

from typing import Annotated

from fastapi import APIRouter, Query, Request
from fastapi.responses import StreamingResponse

from app.api.deps import RuntimeDep, WakeDep
from app.core.anthropic_api import MESSAGE_BATCHES_PATH
from app.domains.message_batches.deps import MessageBatchServiceDep
from app.domains.message_batches.schemas import (
    ANTHROPIC_ERROR_RESPONSES,
    CREATE_ERROR_RESPONSES,
    DeletedMessageBatch,
    MessageBatch,
    MessageBatchCreateParams,
    MessageBatchList,
)
from app.domains.message_batches.service import to_message_batch
from app.domains.organization.deps import AnthropicProjectDep, CallerDep
from app.schemas.common import json_body

router = APIRouter(prefix=MESSAGE_BATCHES_PATH, tags=["message batches"], responses=ANTHROPIC_ERROR_RESPONSES)


def _base_url(request: Request) -> str:
    return str(request.base_url).rstrip("/")


@router.post(
    "",
    response_model=MessageBatch,
    openapi_extra=json_body(MessageBatchCreateParams),
    responses=CREATE_ERROR_RESPONSES,
)
async def create_message_batch(
    request: Request, caller: CallerDep, runtime: RuntimeDep, batches: MessageBatchServiceDep, wake_worker: WakeDep
) -> MessageBatch:
    """Create a Message Batch from `requests: [{custom_id, params}]`; it starts `in_progress`. 429
    `rate_limit_error` (Retry-After) past the project's or the server's cap on creates in progress."""
    with runtime.caps.message_batch_create.slot(caller.project):  # before the body: it is the cost
        chunks = [chunk async for chunk in request.stream()]
        batch = await batches.create(caller.project, chunks, api_key_id=caller.key_id)
    wake_worker()
    return to_message_batch(batch, _base_url(request))


@router.get("", response_model=MessageBatchList)
async def list_message_batches(
    request: Request,
    project: AnthropicProjectDep,
    batches: MessageBatchServiceDep,
    before_id: str | None = None,
    after_id: str | None = None,
    limit: Annotated[int, Query(ge=1, le=1000)] = 20,
) -> MessageBatchList:
    """The project's Message Batches, newest first."""
    # An empty cursor is no cursor.
    page = await batches.list(project, limit=limit, after_id=after_id or None, before_id=before_id or None)
    data = [to_message_batch(b, _base_url(request)) for b in page.items]
    return MessageBatchList(
        data=data,
        has_more=page.has_more,
        first_id=data[0].id if data else None,
        last_id=data[-1].id if data else None,
    )


@router.get("/{message_batch_id}", response_model=MessageBatch)
async def retrieve_message_batch(
    request: Request, message_batch_id: str, project: AnthropicProjectDep, batches: MessageBatchServiceDep
) -> MessageBatch:
    return to_message_batch(await batches.get(project, message_batch_id), _base_url(request))


@router.post("/{message_batch_id}/cancel", response_model=MessageBatch)
async def cancel_message_batch(
    request: Request,
    message_batch_id: str,
    project: AnthropicProjectDep,
    batches: MessageBatchServiceDep,
    wake_worker: WakeDep,
) -> MessageBatch:
    """`canceling` at once; `ended` once in-flight requests are stopped (the rest `canceled`)."""
    batch = await batches.cancel(project, message_batch_id)
    wake_worker(batch.id)
    return to_message_batch(batch, _base_url(request))


@router.post("/{message_batch_id}/pause", response_model=MessageBatch)
async def pause_message_batch(
    request: Request,
    message_batch_id: str,
    project: AnthropicProjectDep,
    batches: MessageBatchServiceDep,
    wake_worker: WakeDep,
) -> MessageBatch:
    """batchd's: pause a batch in progress (`paused_at` set): no request of it starts until it is resumed."""
    batch = await batches.pause(project, message_batch_id)
    wake_worker(batch.id)
    return to_message_batch(batch, _base_url(request))


@router.post("/{message_batch_id}/resume", response_model=MessageBatch)
async def resume_message_batch(
    request: Request,
    message_batch_id: str,
    project: AnthropicProjectDep,
    batches: MessageBatchServiceDep,
    wake_worker: WakeDep,
) -> MessageBatch:
    """batchd's: resume a paused batch."""
    batch = await batches.pause(project, message_batch_id, paused=False)
    wake_worker()
    return to_message_batch(batch, _base_url(request))


@router.delete("/{message_batch_id}", response_model=DeletedMessageBatch)
async def delete_message_batch(
    message_batch_id: str, project: AnthropicProjectDep, batches: MessageBatchServiceDep
) -> DeletedMessageBatch:
    """Delete an ended Message Batch and its results."""
    return DeletedMessageBatch(id=await batches.delete(project, message_batch_id))


@router.get(
    "/{message_batch_id}/results",
    response_class=StreamingResponse,
    responses={200: {"content": {"application/x-jsonl": {}}, "description": "One result line per request"}},
)
async def message_batch_results(
    message_batch_id: str, project: AnthropicProjectDep, batches: MessageBatchServiceDep
) -> StreamingResponse:
    """The results of an ended batch as JSONL, one line per request, streamed."""
    return StreamingResponse(await batches.results(project, message_batch_id), media_type="application/x-jsonl")
