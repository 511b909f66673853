"""`GET /v1/queue/requests`: the caller's project's single requests, background responses and
flex requests, newest first (batchd's own route; the dashboard's Requests page)."""

from __future__ import annotations

from typing import Annotated

from fastapi import APIRouter, Query

from app.api.deps import SessionDep, StoreDep
from app.domains.organization.deps import ProjectDep
from app.domains.responses.list_schemas import SingleRequest
from app.domains.responses.requests import list_single_requests
from app.schemas.common import ERROR_RESPONSES, ListPage

router = APIRouter(prefix="/queue", tags=["queue"], responses=ERROR_RESPONSES)


@router.get("/requests", response_model=ListPage[SingleRequest])
async def list_requests(
    session: SessionDep,
    store: StoreDep,
    project: ProjectDep,
    after: str | None = None,
    limit: Annotated[int, Query(ge=1, le=100)] = 20,
) -> ListPage[SingleRequest]:
    """The project's background responses (until deleted) and flex requests (while they run, and
    once answered until their tombstones are purged), newest first: each one's lane, status (as
    OpenAI's Response object names it), model, end and seconds from create to end, and tokens."""
    return await list_single_requests(session, store, project, after=after, limit=limit)
