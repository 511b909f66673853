"""The audit log (`GET /v1/organization/audit_logs`, `client.admin.organization.audit_logs.list`):
newest first, OpenAI's filters (`effective_at[gt|gte|lt|lte]`, `event_types`, `project_ids`,
`actor_ids`, `resource_ids`, `actor_emails`) and cursors. The official client sends lists as
`event_types[]=a&event_types[]=b` (documented so); `event_types=a&event_types=b` works too."""

from __future__ import annotations

from typing import Annotated

from fastapi import APIRouter, Query, Request
from pydantic import Field

from app.api.deps import SessionDep
from app.core.errors import InvalidRequest
from app.domains.organization.audit_log import audit_page
from app.domains.organization.audit_repository import AuditFilter
from app.domains.organization.deps import ADMIN_RESPONSES, AdminDep, Cursor, Limit
from app.domains.organization.schemas import NO_NUL, AuditLogObject
from app.schemas.common import ListPage

router = APIRouter(
    prefix="/organization/audit_logs", tags=["admin"], responses=ADMIN_RESPONSES, dependencies=[AdminDep]
)

MAX_IDS, MAX_ID = 100, 256
Item = Annotated[str, Field(max_length=MAX_ID, pattern=NO_NUL)]
Seconds = Annotated[int | None, Query(ge=0, le=2**63 - 1)]


def _ids(name: str) -> object:
    return Query(alias=f"{name}[]", max_length=MAX_IDS)


def _given(request: Request, name: str) -> list[str]:
    """Both spellings of a list parameter, checked as the documented one is."""
    values = request.query_params.getlist(name) + request.query_params.getlist(f"{name}[]")
    if len(values) > MAX_IDS:
        raise InvalidRequest(f"Invalid '{name}': at most {MAX_IDS} values.", param=name, code="invalid_value")
    for value in values:
        if len(value) > MAX_ID:
            raise InvalidRequest(f"Invalid value for '{name}': '{value[:40]}'.", param=name, code="invalid_value")
    return values


@router.get("", response_model=ListPage[AuditLogObject])
async def list_audit_logs(
    request: Request,
    session: SessionDep,
    after: Cursor = None,
    before: Cursor = None,
    limit: Limit = 20,
    event_types: Annotated[list[Item], _ids("event_types")] = [],  # noqa: B006 - FastAPI copies defaults
    project_ids: Annotated[list[Item], _ids("project_ids")] = [],  # noqa: B006
    actor_ids: Annotated[list[Item], _ids("actor_ids")] = [],  # noqa: B006
    actor_emails: Annotated[list[Item], _ids("actor_emails")] = [],  # noqa: B006
    resource_ids: Annotated[list[Item], _ids("resource_ids")] = [],  # noqa: B006
    gt: Annotated[Seconds, Query(alias="effective_at[gt]")] = None,
    gte: Annotated[Seconds, Query(alias="effective_at[gte]")] = None,
    lt: Annotated[Seconds, Query(alias="effective_at[lt]")] = None,
    lte: Annotated[Seconds, Query(alias="effective_at[lte]")] = None,
) -> ListPage[AuditLogObject]:
    """batchd's actors are keys, without emails: filtering by `actor_emails` matches nothing."""
    if _given(request, "actor_emails"):
        return ListPage.of([], False)
    where = AuditFilter(
        _given(request, "event_types"),
        _given(request, "project_ids"),
        _given(request, "actor_ids"),
        _given(request, "resource_ids"),
        gt=gt,
        gte=gte,
        lt=lt,
        lte=lte,
    )
    return await audit_page(session, where, after=after, before=before, limit=limit)
