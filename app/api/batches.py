"""Batches API routes (OpenAI `/v1/batches`)."""

from __future__ import annotations

from typing import Annotated

from fastapi import APIRouter, Body, Query, Request

from app.api.deps import BatchServiceDep, ProjectDep, SessionDep
from app.schemas.batches import BatchCreateParams, BatchCreateRequest, BatchObject
from app.schemas.common import ERROR_RESPONSES, ListPage, error_doc, json_body
from app.services.unit_of_work import after_commit

router = APIRouter(prefix="/batches", tags=["batches"], responses=ERROR_RESPONSES)


def _wake_worker_after_commit(request: Request, session, batch_id: str | None = None) -> None:
    async def wake() -> None:
        # No worker yet while the engines load: it claims queued batches when it starts.
        if request.app.state.worker is not None:
            request.app.state.worker.wake(batch_id)

    after_commit(session, wake)


@router.post(
    "",
    response_model=BatchObject,
    openapi_extra=json_body(BatchCreateParams),
    responses={413: error_doc("Request body too large"), 429: error_doc("The project's active-batch limit is reached")},
)
async def create_batch(
    request: Request,
    project: ProjectDep,
    batches: BatchServiceDep,
    session: SessionDep,
    body: Annotated[BatchCreateRequest | None, Body()] = None,
) -> BatchObject:
    """Create a batch from an uploaded `purpose=batch` file; it starts in `validating`."""
    batch = await batches.create(project, body or BatchCreateRequest())
    _wake_worker_after_commit(request, session)
    return BatchObject.from_row(batch)


@router.get("", response_model=ListPage[BatchObject])
async def list_batches(
    project: ProjectDep,
    batches: BatchServiceDep,
    after: str | None = None,
    limit: Annotated[int, Query(ge=1, le=100)] = 20,
) -> ListPage[BatchObject]:
    """The project's batches, newest first."""
    page = await batches.list(project, limit=limit, after=after)
    return ListPage.of([BatchObject.from_row(b) for b in page.items], page.has_more)


@router.get("/{batch_id}", response_model=BatchObject)
async def retrieve_batch(batch_id: str, project: ProjectDep, batches: BatchServiceDep) -> BatchObject:
    return BatchObject.from_row(await batches.get(project, batch_id))


@router.post(
    "/{batch_id}/cancel",
    response_model=BatchObject,
    responses={409: ERROR_RESPONSES[400] | {"description": "The batch is already finished"}},
)
async def cancel_batch(
    request: Request, batch_id: str, project: ProjectDep, batches: BatchServiceDep, session: SessionDep
) -> BatchObject:
    """Cancel a batch: `cancelling` at once, `cancelled` once in-flight requests are aborted."""
    batch = await batches.cancel(project, batch_id)
    _wake_worker_after_commit(request, session, batch.id)
    return BatchObject.from_row(batch)
