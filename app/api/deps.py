"""Dependency aliases shared by the routes."""

from __future__ import annotations

import json
from collections.abc import AsyncIterator
from dataclasses import dataclass
from typing import Annotated

from fastapi import Depends, Query, Request
from sqlalchemy.ext.asyncio import AsyncSession

from app.api.runtime import Runtime, runtime_of
from app.core.config import Settings
from app.core.errors import Forbidden, InvalidRequest
from app.core.input_hygiene import check_json, check_text, json_may_be_unclean
from app.db.engine import Database
from app.services.batches.batches import BatchService
from app.services.batches.results import BatchResultsService
from app.services.files.files import FileService
from app.services.files.uploads import UploadService
from app.services.message_batches.message_batches import MessageBatchService
from app.services.organization.auth import Caller
from app.services.responses.responses import BackgroundResponseService
from app.services.unit_of_work import after_commit, unit_of_work
from app.services.webhooks.webhooks import WebhookService
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
    async with unit_of_work(sessions) as session:
        yield session


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


async def reject_unclean_input(request: Request) -> None:
    """400 for a NUL or a lone surrogate in any path id, query parameter (a cursor, a filter, a
    metadata key) or JSON body member (app/core/input_hygiene.py), on every route, before a
    service or the database sees it."""
    for name, value in request.path_params.items():
        check_text(name, str(value))
    for key, value in request.query_params.multi_items():
        name = key.split("[", 1)[0] or key  # metadata[k]=v is the parameter `metadata`
        check_text(name, key)
        check_text(name, value)
    if request.headers.get("content-type", "").startswith("application/json"):
        raw = await request.body()  # JSON bodies only: a multipart upload is never read whole
        if json_may_be_unclean(raw):
            try:
                body = json.loads(raw)
            except ValueError:
                return  # not JSON: the route's own parse says so
            check_json(body)


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
            runtime.wake_worker(batch_id)

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


async def get_webhook_service(session: SessionDep, settings: SettingsDep) -> WebhookService:
    return WebhookService(session, settings)


WebhookServiceDep = Annotated[WebhookService, Depends(get_webhook_service)]


async def get_anthropic_project(caller: CallerDep) -> str:
    return caller.project


async def get_message_batch_service(session: SessionDep, store: StoreDep, settings: SettingsDep) -> MessageBatchService:
    return MessageBatchService(session, store, settings)


AnthropicProjectDep = Annotated[str, Depends(get_anthropic_project)]
MessageBatchServiceDep = Annotated[MessageBatchService, Depends(get_message_batch_service)]


async def get_background_response_service(
    session: SessionDep, store: StoreDep, settings: SettingsDep
) -> BackgroundResponseService:
    return BackgroundResponseService(session, store, settings)


BackgroundResponseServiceDep = Annotated[BackgroundResponseService, Depends(get_background_response_service)]
