"""Projects as the Administration API sees them (`/v1/organization/projects`).

A project's id is the name its keys, files and batches carry: `proj_...` for one created by API,
the operator's name for one from `batchd projects set` or `batchd keys create --project`. Its
`name` is a display name (the id when none was given). Archiving refuses its keys from the next
request and cancels its queued and running batches (they finalize as a cancel does, with the
lines already run); its files stay readable to admin keys."""

from __future__ import annotations

import secrets
import string
import time

from sqlalchemy.ext.asyncio import AsyncSession

from app.core.errors import InvalidRequest, NotFound
from app.db.models import Project
from app.db.repositories.batches import BatchRepository
from app.domains.organization.audit_log import record
from app.domains.organization.auth import Caller
from app.domains.organization.projects import DEFAULT_WEIGHT, import_uris_value
from app.domains.organization.projects_repository import ProjectRepository
from app.domains.organization.schemas import ProjectCreateParams, ProjectObject, ProjectUpdateParams
from app.schemas.common import ListPage

_ID_ALPHABET = string.ascii_letters + string.digits


def new_project_id() -> str:
    return "proj_" + "".join(secrets.choice(_ID_ALPHABET) for _ in range(24))


def project_object(row: Project) -> ProjectObject:
    return ProjectObject(
        id=row.name,
        name=row.title or row.name,
        created_at=row.created_at if row.created_at is not None else row.updated_at,
        archived_at=row.archived_at,
        status="archived" if row.archived_at is not None else "active",
        retention_days=row.retention_days,
        allowed_import_uris=list(row.allowed_import_uris or ()),
    )


class OrganizationProjects:
    def __init__(self, session: AsyncSession, caller: Caller) -> None:
        self.session = session
        self.caller = caller
        self.repo = ProjectRepository(session)

    async def get(self, project_id: str) -> Project:
        row = await self.repo.get(project_id) if len(project_id) <= 128 else None
        if row is None:
            raise NotFound(f"No project found with id '{project_id}'.", param="project_id", code="not_found")
        return row

    async def get_active(self, project_id: str) -> Project:
        row = await self.get(project_id)
        if row.archived_at is not None:
            raise InvalidRequest(
                f"Project '{project_id}' is archived: archived projects cannot be used or updated.",
                param="project_id",
                code="project_archived",
            )
        return row

    async def create(self, params: ProjectCreateParams) -> Project:
        now = int(time.time())
        row = Project(name=new_project_id(), title=params.name, weight=DEFAULT_WEIGHT, created_at=now, updated_at=now)
        row = await self.repo.save(row)
        await record(
            self.session, self.caller.key_id, "project.created", row.name, row.name, {"data": {"title": row.title}}
        )
        return row

    async def update(self, project_id: str, params: ProjectUpdateParams) -> Project:
        row = await self.get_active(project_id)
        changes: dict[str, object] = {}
        if params.name is not None and params.name != row.title:
            row.title = changes["title"] = params.name
        if "retention_days" in params.model_fields_set and params.retention_days != row.retention_days:
            row.retention_days = changes["retention_days"] = params.retention_days
        if "allowed_import_uris" in params.model_fields_set:
            try:
                uris = import_uris_value(params.allowed_import_uris or ())
            except ValueError as exc:
                raise InvalidRequest(str(exc), param="allowed_import_uris", code="invalid_value") from None
            if uris != (row.allowed_import_uris or None):
                row.allowed_import_uris = changes["allowed_import_uris"] = uris
        if changes:
            row.updated_at = int(time.time())
            await self.session.flush()
            await record(
                self.session, self.caller.key_id, "project.updated", row.name, row.name, {"changes_requested": changes}
            )
        return row

    async def archive(self, project_id: str) -> tuple[Project, int]:
        """Archive (once; archiving again changes nothing). Returns the row and how many batches
        it cancelled."""
        row = await self.get(project_id)
        if row.archived_at is not None:
            return row, 0
        now = int(time.time())
        row.archived_at = row.updated_at = now
        await self.session.flush()
        cancelled = await BatchRepository(self.session).request_cancel_all(row.name, now)
        await record(self.session, self.caller.key_id, "project.archived", row.name, row.name)
        return row, cancelled

    async def page(self, *, include_archived: bool, after: str | None, limit: int) -> ListPage[ProjectObject]:
        rows, has_more = await self.repo.page(include_archived=include_archived, after=after, limit=limit)
        return ListPage.of([project_object(r) for r in rows], has_more)
