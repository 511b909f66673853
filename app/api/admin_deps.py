"""Dependencies of the Administration API routes: admin callers only."""

from __future__ import annotations

from typing import Annotated, Any

from fastapi import Body, Depends, Query

from app.api.deps import CallerDep, RuntimeDep, SessionDep
from app.core.errors import ErrorResponse
from app.schemas.admin import NO_NUL
from app.schemas.common import ERROR_RESPONSES, Responses
from app.services.limits.model_permissions import ModelPermissions
from app.services.limits.rate_limits import RateLimits
from app.services.organization.org_keys import OrganizationKeys
from app.services.organization.org_projects import OrganizationProjects

ADMIN_RESPONSES: Responses = {
    **ERROR_RESPONSES,
    403: {"model": ErrorResponse, "description": "Not an admin key"},
}


async def get_org_projects(session: SessionDep, caller: CallerDep) -> OrganizationProjects:
    return OrganizationProjects(session, caller)


async def get_org_keys(session: SessionDep, caller: CallerDep, runtime: RuntimeDep) -> OrganizationKeys:
    return OrganizationKeys(session, caller, runtime.auth.secret)


OrgProjectsDep = Annotated[OrganizationProjects, Depends(get_org_projects)]
OrgKeysDep = Annotated[OrganizationKeys, Depends(get_org_keys)]


async def get_rate_limits(session: SessionDep, caller: CallerDep) -> RateLimits:
    return RateLimits(session, caller)


RateLimitsDep = Annotated[RateLimits, Depends(get_rate_limits)]


async def get_model_permissions(session: SessionDep, caller: CallerDep) -> ModelPermissions:
    return ModelPermissions(session, caller)


ModelPermissionsDep = Annotated[ModelPermissions, Depends(get_model_permissions)]

# Query and body types the admin routes share.
Limit = Annotated[int, Query(ge=1, le=100)]
# A JSON body read loosely, then validated by the model its route documents (json_body).
JsonObject = Annotated[dict[str, Any] | None, Body()]
Cursor = Annotated[str | None, Query(max_length=256, pattern=NO_NUL)]
