"""A project's rate limits (`/v1/organization/projects/{project_id}/rate_limits`, as
`client.admin.organization.projects.rate_limits.*` calls them): one per served model."""

from __future__ import annotations

from fastapi import APIRouter

from app.api.deps import RuntimeDep
from app.domains.limits.deps import RateLimitsDep
from app.domains.models.service import list_entries
from app.domains.organization.deps import ADMIN_RESPONSES, AdminDep, Cursor, JsonObject, Limit
from app.domains.organization.schemas import RateLimitObject, RateLimitUpdateParams
from app.schemas.common import ListPage, json_body, validated

router = APIRouter(
    prefix="/organization/projects/{project_id}/rate_limits",
    tags=["admin"],
    responses=ADMIN_RESPONSES,
    dependencies=[AdminDep],
)


@router.get("", response_model=ListPage[RateLimitObject])
async def list_rate_limits(
    project_id: str,
    limits: RateLimitsDep,
    runtime: RuntimeDep,
    after: Cursor = None,
    before: Cursor = None,
    limit: Limit = 100,
) -> ListPage[RateLimitObject]:
    entries = await list_entries(runtime.settings, runtime.db, runtime.engines, runtime.worker)
    served = [entry["id"] for entry in entries]
    return await limits.page(project_id, served, after=after, before=before, limit=limit)


@router.post(
    "/{rate_limit_id}", response_model=RateLimitObject, openapi_extra=json_body(RateLimitUpdateParams, required=False)
)
async def update_rate_limit(
    project_id: str, rate_limit_id: str, limits: RateLimitsDep, body: JsonObject = None
) -> RateLimitObject:
    """`rl-<model>`: the daily limits from the next batch validated; `weight` and
    `max_enqueued_tokens` (extra_body) are the project's own, for every model."""
    return await limits.update(project_id, rate_limit_id, validated(RateLimitUpdateParams, body or {}))
