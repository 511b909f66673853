"""Dependency aliases shared by the routes."""

from __future__ import annotations

from collections.abc import AsyncIterator
from dataclasses import dataclass
from typing import Annotated

from fastapi import Depends, Query, Request
from sqlalchemy.ext.asyncio import AsyncSession

from app.api.runtime import Runtime, runtime_of
from app.core.config import Settings
from app.core.errors import Forbidden, InvalidRequest
from app.db.engine import Database
from app.services.auth import Caller
from app.services.batch_results import BatchResultsService
from app.services.batches import BatchService
from app.services.files import FileService
from app.services.unit_of_work import after_commit, run_hooks
from app.services.uploads import UploadService
from app.storage.base import BlobStore

READ_METHODS = {"GET", "HEAD", "OPTIONS"}


# The dependencies below are `async def` although some never await: FastAPI runs plain `def`
# dependencies in its thread pool, a thread hop per dependency on every request.
async def get_runtime(request: Request) -> Runtime:
    return runtime_of(request.app)


RuntimeDep = Annotated[Runtime, Depends(get_runtime)]


async def get_session(request: Request, runtime: RuntimeDep) -> AsyncIterator[AsyncSession]:
    """One unit of work per request: commit when the route returns, roll back if it raises.
    Reads use the read pool so they never wait on SQLite's single writer."""
    db = runtime.db
    sessions = db.read_sessions if request.method in READ_METHODS else db.write_sessions
    async with sessions() as session:
        try:
            yield session
            await session.commit()
        except BaseException:
            await session.rollback()
            await run_hooks(session, "on_rollback")
            raise
        await run_hooks(session, "after_commit")


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


async def get_caller(request: Request, runtime: RuntimeDep) -> Caller:
    """Who the request is (every /v1 route asks: one key lookup a request, shared by the
    dependencies below); runs before any request body is read."""
    return await runtime.auth.caller_for(request.headers.get("authorization"))


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


async def get_settings(runtime: RuntimeDep) -> Settings:
    return runtime.settings


async def get_store(runtime: RuntimeDep) -> BlobStore:
    return runtime.store


async def get_db(runtime: RuntimeDep) -> Database:
    return runtime.db


# scope="function": commit before the response is sent, so a 200 means the data is stored.
SessionDep = Annotated[AsyncSession, Depends(get_session, scope="function")]
ProjectDep = Annotated[str, Depends(get_project)]
ListScopeDep = Annotated[ListScope, Depends(get_list_scope)]
CallerDep = Annotated[Caller, Depends(get_caller)]
AdminDep = Depends(require_admin)
SettingsDep = Annotated[Settings, Depends(get_settings)]
StoreDep = Annotated[BlobStore, Depends(get_store)]
DatabaseDep = Annotated[Database, Depends(get_db)]


class WakeAfterCommit:
    """Wakes this replica's worker once the request's unit of work has committed (so it finds
    the batch just created or cancelled), not at its next poll."""

    def __init__(self, session: AsyncSession, runtime: Runtime) -> None:
        self.session = session
        self.runtime = runtime

    def __call__(self, batch_id: str | None = None) -> None:
        """`batch_id`: a batch whose shards running here must re-read its status at once."""
        runtime = self.runtime

        async def wake() -> None:
            # No worker while the engines load (it claims queued batches when it starts), nor
            # on an --api-only replica (another replica's poll finds the batch).
            if runtime.worker is not None:
                runtime.worker.wake(batch_id)

        after_commit(self.session, wake)


async def get_wake_after_commit(session: SessionDep, runtime: RuntimeDep) -> WakeAfterCommit:
    return WakeAfterCommit(session, runtime)


WakeDep = Annotated[WakeAfterCommit, Depends(get_wake_after_commit)]


async def get_file_service(session: SessionDep, store: StoreDep, settings: SettingsDep) -> FileService:
    return FileService(session, store, settings)


FileServiceDep = Annotated[FileService, Depends(get_file_service)]


async def get_batch_service(session: SessionDep, settings: SettingsDep, store: StoreDep) -> BatchService:
    return BatchService(session, settings, store)


BatchServiceDep = Annotated[BatchService, Depends(get_batch_service)]


async def get_batch_results_service(session: SessionDep, db: DatabaseDep, store: StoreDep) -> BatchResultsService:
    return BatchResultsService(session, db, store)


BatchResultsServiceDep = Annotated[BatchResultsService, Depends(get_batch_results_service)]


async def get_upload_service(
    session: SessionDep, store: StoreDep, settings: SettingsDep, db: DatabaseDep
) -> UploadService:
    return UploadService(session, store, settings, db)


UploadServiceDep = Annotated[UploadService, Depends(get_upload_service)]
