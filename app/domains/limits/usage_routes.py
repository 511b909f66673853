"""OpenAI's Usage and Costs APIs for what batchd ran, for chargeback: admin keys only.

Usage (`/v1/organization/usage/completions|embeddings|audio_transcriptions`): `start_time`
(Unix seconds, inclusive), `end_time` (exclusive, default now), `bucket_width` (`1m`, `1h`,
`1d`), `group_by` (`project_id`, `api_key_id`, `model`, `batch`), `project_ids`, `api_key_ids`,
`models`, `batch`, `limit`, `page`. Costs (`/v1/organization/costs`): `bucket_width=1d`,
`group_by` (`project_id`, `api_key_id`, `line_item`), `project_ids`, `api_key_ids`,
`line_items`. They are read from the query string itself, where lists come as
`group_by=a&group_by=b` (the openai client) or `group_by[]=a`."""

from __future__ import annotations

from fastapi import APIRouter, Request

from app.api.deps import RuntimeDep, SessionDep
from app.core.endpoints import USAGE_AUDIO_TRANSCRIPTIONS, USAGE_COMPLETIONS, USAGE_EMBEDDINGS
from app.core.errors import ErrorResponse
from app.domains.limits.costs import costs_page
from app.domains.limits.usage import UsageParams, usage_page
from app.domains.limits.usage_schemas import UsagePage
from app.domains.organization.deps import AdminDep
from app.schemas.common import ERROR_RESPONSES, Responses

ADMIN_ONLY: Responses = {403: {"model": ErrorResponse, "description": "Not an admin key"}}
router = APIRouter(
    prefix="/organization",
    tags=["usage"],
    responses={**ERROR_RESPONSES, **ADMIN_ONLY},
    dependencies=[AdminDep],
)


def _params(request: Request) -> UsageParams:
    query = request.query_params
    return UsageParams.from_query(query.get, query.getlist)


@router.get("/usage/completions", response_model=UsagePage)
async def completions_usage(request: Request, session: SessionDep) -> UsagePage:
    """Input, cached input and output tokens and requests of the lines batchd ran, per bucket."""
    return await usage_page(session, USAGE_COMPLETIONS, _params(request))


@router.get("/usage/embeddings", response_model=UsagePage)
async def embeddings_usage(request: Request, session: SessionDep) -> UsagePage:
    """Input tokens and requests of embeddings (and score, rerank) lines, per bucket."""
    return await usage_page(session, USAGE_EMBEDDINGS, _params(request))


@router.get("/usage/audio_transcriptions", response_model=UsagePage)
async def audio_transcriptions_usage(request: Request, session: SessionDep) -> UsagePage:
    """Seconds of audio and requests of transcription and translation lines, per bucket."""
    return await usage_page(session, USAGE_AUDIO_TRANSCRIPTIONS, _params(request))


@router.get("/costs", response_model=UsagePage)
async def costs(request: Request, session: SessionDep, runtime: RuntimeDep) -> UsagePage:
    """What the lines batchd ran cost at the model config's prices, per day."""
    return await costs_page(session, _params(request), runtime.models.prices)
