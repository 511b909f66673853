"""Who a request is (its caller, project and list scope, admin or not), and the dependencies of
the Administration API routes."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Annotated, Any

from fastapi import Body, Depends, Query, Request

from app.api.deps import SessionDep
from app.core.errors import ErrorResponse, Forbidden, InvalidRequest
from app.domains.organization.auth import Caller, authenticator_of
from app.domains.organization.org_keys import OrganizationKeys
from app.domains.organization.org_projects import OrganizationProjects
from app.domains.organization.schemas import NO_NUL
from app.schemas.common import ERROR_RESPONSES, Responses

# `?project=*` on the batch and file lists: every project the key may see (an admin key: all).
EVERY_PROJECT = "*"
# batchd's: the project whose batches or files to list, `*` for every project the key may see; an
# admin key may name any project (rows then say their `project`), another key only its own. Left
# out of /openapi.json: the dashboard's, documented in docs/dashboard.md, and OpenAI's lists have none.
PROJECT_QUERY = Query(include_in_schema=False)


@dataclass(frozen=True)
class ListScope:
    """Whose rows a list shows: one project, or every project (None); `by_admin` when an admin
    key named it (the rows then say which project each is)."""

    project: str | None
    by_admin: bool = False


async def get_caller(request: Request) -> Caller:
    """Who the request is: the front door (app/http/front_door.py) resolved the key of every /v1
    request before its body was read, and keeps the caller in the request's state."""
    caller = request.state.caller
    assert isinstance(caller, Caller), "the front door resolves every /v1 request's caller"
    return caller


CallerDep = Annotated[Caller, Depends(get_caller)]


def _acting_project(caller: Caller, wanted: str | None) -> str:
    if wanted is None or wanted == caller.project:
        return caller.project
    if not caller.is_admin:
        raise Forbidden(
            "Only an admin key may name another 'project' (batchd keys create --admin).",
            param="project",
            code="insufficient_permissions",
        )
    return wanted


async def get_project(request: Request, caller: Annotated[Caller, Depends(get_caller)]) -> str:
    """The caller's project (an admin key may name another with `?project=`)."""
    wanted = request.query_params.get("project")
    if wanted == EVERY_PROJECT:
        raise InvalidRequest("'project=*' is for the batch and file lists; name one project here.", param="project")
    return _acting_project(caller, wanted)


async def get_list_scope(
    caller: Annotated[Caller, Depends(get_caller)], project: Annotated[str | None, PROJECT_QUERY] = None
) -> ListScope:
    """The project a list shows: the caller's, or for an admin key the one named; `*` is every
    project the key may see (an admin key's: all of them; another key's: its own)."""
    by_admin = project is not None and caller.is_admin
    if project == EVERY_PROJECT:
        return ListScope(None if caller.is_admin else caller.project, by_admin)
    return ListScope(_acting_project(caller, project), by_admin)


async def require_admin(caller: Annotated[Caller, Depends(get_caller)]) -> None:
    """Admin keys only (`batchd keys create --admin`); everyone in open mode."""
    if not caller.is_admin:
        raise Forbidden(
            "You have insufficient permissions for this operation: it needs an admin API key "
            "(batchd keys create --admin).",
            code="insufficient_permissions",
        )


ProjectDep = Annotated[str, Depends(get_project)]
ListScopeDep = Annotated[ListScope, Depends(get_list_scope)]
AdminDep = Depends(require_admin)


async def get_anthropic_project(caller: CallerDep) -> str:
    return caller.project


AnthropicProjectDep = Annotated[str, Depends(get_anthropic_project)]

ADMIN_RESPONSES: Responses = {
    **ERROR_RESPONSES,
    403: {"model": ErrorResponse, "description": "Not an admin key"},
}


async def get_org_projects(session: SessionDep, caller: CallerDep) -> OrganizationProjects:
    return OrganizationProjects(session, caller)


async def get_org_keys(request: Request, session: SessionDep, caller: CallerDep) -> OrganizationKeys:
    return OrganizationKeys(session, caller, authenticator_of(request.app).secret)


OrgProjectsDep = Annotated[OrganizationProjects, Depends(get_org_projects)]
OrgKeysDep = Annotated[OrganizationKeys, Depends(get_org_keys)]


# Query and body types the admin routes share.
Limit = Annotated[int, Query(ge=1, le=100)]
# A JSON body read loosely, then validated by the model its route documents (json_body).
JsonObject = Annotated[dict[str, Any] | None, Body()]
Cursor = Annotated[str | None, Query(max_length=256, pattern=NO_NUL)]
