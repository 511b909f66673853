"""The audit log of the Administration API: every change is recorded in the transaction that
makes it (so a change and its entry commit or roll back together), and listed as OpenAI lists
`/organization/audit_logs`."""

from __future__ import annotations

import json
import time
from typing import Any

from sqlalchemy.ext.asyncio import AsyncSession

from app.core.errors import InvalidRequest
from app.db.models import AuditLog
from app.domains.organization.audit_repository import AuditFilter, AuditLogRepository
from app.domains.organization.schemas import AuditActor, AuditActorKey, AuditLogObject, AuditProject
from app.schemas.common import ListPage

# What batchd records: OpenAI's names for them.
EVENT_TYPES = (
    "project.created",
    "project.updated",
    "project.archived",
    "service_account.created",
    "service_account.deleted",
    "api_key.created",
    "api_key.deleted",
    "rate_limit.updated",
    "resource.deleted",  # a file or a batch's results, by the project's retention period
)
ID_PREFIX = "audit_log-"


async def record(
    session: AsyncSession,
    actor_key_id: str | None,
    event_type: str,
    resource_id: str,
    project_id: str | None,
    details: dict[str, Any] | None = None,
) -> None:
    """Add one entry to the change's unit of work (committed with it or not at all). The actor is
    the wire id of the key that made the change; None: the operator's CLI (or open mode)."""
    assert event_type in EVENT_TYPES, event_type
    await AuditLogRepository(session).add(
        AuditLog(
            type=event_type,
            effective_at=int(time.time()),
            resource_id=resource_id,
            project_id=project_id,
            actor_key_id=actor_key_id,
            details=json.dumps({"id": resource_id, **(details or {})}),
        )
    )


def _cursor(value: str | None, param: str) -> int | None:
    if value is None:
        return None
    number = value.removeprefix(ID_PREFIX)
    if number == value or not number.isascii() or not number.isdigit() or len(number) > 9:  # an INTEGER
        raise InvalidRequest(f"Invalid '{param}': no audit log entry has the id '{value}'.", param=param)
    return int(number)


def _wire(row: AuditLog) -> AuditLogObject:
    actor = AuditActor(api_key=AuditActorKey(id=row.actor_key_id, service_account={"id": row.actor_key_id}))
    return AuditLogObject.model_validate(
        {
            "id": f"{ID_PREFIX}{row.seq}",
            "type": row.type,
            "effective_at": row.effective_at,
            "actor": actor if row.actor_key_id else None,
            "project": AuditProject(id=row.project_id) if row.project_id else None,
            row.type: json.loads(row.details),
        }
    )


async def audit_page(
    session: AsyncSession, where: AuditFilter, *, after: str | None, before: str | None, limit: int
) -> ListPage[AuditLogObject]:
    # Any of OpenAI's event types may be asked for: those batchd never records list nothing.
    rows, has_more = await AuditLogRepository(session).page(
        where, after=_cursor(after, "after"), before=_cursor(before, "before"), limit=limit
    )
    return ListPage.of([_wire(row) for row in rows], has_more)
