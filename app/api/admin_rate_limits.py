"""A project's rate limits (`/v1/organization/projects/{project_id}/rate_limits`, as
`client.admin.organization.projects.rate_limits.*` calls them): one per served model."""

from __future__ import annotations

from fastapi import APIRouter

from app.api.admin_deps import ADMIN_RESPONSES, Cursor, JsonObject, Limit, RateLimitsDep
from app.api.deps import AdminDep, RuntimeDep
from app.schemas.admin import RateLimitObject, RateLimitUpdateParams
from app.schemas.common import ListPage, json_body, validated
from app.services.models import list_entries

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
