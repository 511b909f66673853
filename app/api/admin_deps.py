"""Dependencies of the Administration API routes: admin callers only."""

from __future__ import annotations

from typing import Annotated

from fastapi import Depends

from app.api.deps import CallerDep, RuntimeDep, SessionDep
from app.core.errors import ErrorResponse
from app.schemas.common import ERROR_RESPONSES, Responses
from app.services.org_keys import OrganizationKeys
from app.services.org_projects import OrganizationProjects

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
