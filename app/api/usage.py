"""OpenAI's Usage API for what batchd ran (`/v1/organization/usage/completions|embeddings`),
for chargeback: admin keys only.

Query: `start_time` (Unix seconds, inclusive), `end_time` (exclusive, default now),
`bucket_width` (`1m`, `1h`, `1d`), `group_by` (`project_id`, `model`, `batch`), `project_ids`,
`models`, `batch`, `limit`, `page`. They are read from the query string itself, where lists come
as `group_by=a&group_by=b` (the openai client) or `group_by[]=a`."""

from __future__ import annotations

from fastapi import APIRouter, Request

from app.api.deps import AdminDep, SessionDep
from app.core.endpoints import USAGE_COMPLETIONS, USAGE_EMBEDDINGS
from app.core.errors import ErrorResponse
from app.schemas.common import ERROR_RESPONSES, Responses
from app.schemas.usage import UsagePage
from app.services.usage import UsageParams, usage_page

ADMIN_ONLY: Responses = {403: {"model": ErrorResponse, "description": "Not an admin key"}}
router = APIRouter(
    prefix="/organization/usage",
    tags=["usage"],
    responses={**ERROR_RESPONSES, **ADMIN_ONLY},
    dependencies=[AdminDep],
)


def _params(request: Request) -> UsageParams:
    query = request.query_params
    return UsageParams.from_query(query.get, query.getlist)


@router.get("/completions", response_model=UsagePage)
async def completions_usage(request: Request, session: SessionDep) -> UsagePage:
    """Input, cached input and output tokens and requests of the lines batchd ran, per bucket."""
    return await usage_page(session, USAGE_COMPLETIONS, _params(request))


@router.get("/embeddings", response_model=UsagePage)
async def embeddings_usage(request: Request, session: SessionDep) -> UsagePage:
    """Input tokens and requests of embeddings (and score, rerank) lines, per bucket."""
    return await usage_page(session, USAGE_EMBEDDINGS, _params(request))
