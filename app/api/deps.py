"""Dependency aliases shared by the routes."""

from __future__ import annotations

from collections.abc import AsyncIterator
from typing import Annotated

from fastapi import Depends, Request
from sqlalchemy.ext.asyncio import AsyncSession

from app.core.config import Settings
from app.core.errors import Forbidden
from app.services.auth import Caller
from app.services.batches import BatchService
from app.services.files import FileService
from app.services.unit_of_work import run_hooks
from app.services.uploads import UploadService
from app.storage.base import BlobStore

READ_METHODS = {"GET", "HEAD", "OPTIONS"}


async def get_session(request: Request) -> AsyncIterator[AsyncSession]:
    """One unit of work per request: commit when the route returns, roll back if it raises.
    Reads use the read pool so they never wait on SQLite's single writer."""
    db = request.app.state.db
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


async def get_project(request: Request) -> str:
    """The caller's project; runs before any request body is read."""
    return await request.app.state.auth.project_for(request.headers.get("authorization"))


async def get_caller(request: Request) -> Caller:
    """The caller's project and whether its key is an admin key."""
    return await request.app.state.auth.caller_for(request.headers.get("authorization"))


async def require_admin(request: Request) -> None:
    """Admin keys only (`batchd keys create --admin`); everyone in open mode."""
    caller = await request.app.state.auth.caller_for(request.headers.get("authorization"))
    if not caller.is_admin:
        raise Forbidden(
            "You have insufficient permissions for this operation: it needs an admin API key "
            "(batchd keys create --admin).",
            code="insufficient_permissions",
        )


# The dependencies below are `async def` although they never await: FastAPI runs plain `def`
# dependencies in its thread pool, a thread hop per dependency on every request.
async def get_settings(request: Request) -> Settings:
    return request.app.state.settings


async def get_store(request: Request) -> BlobStore:
    return request.app.state.store


# scope="function": commit before the response is sent, so a 200 means the data is stored.
SessionDep = Annotated[AsyncSession, Depends(get_session, scope="function")]
ProjectDep = Annotated[str, Depends(get_project)]
CallerDep = Annotated[Caller, Depends(get_caller)]
AdminDep = Depends(require_admin)
SettingsDep = Annotated[Settings, Depends(get_settings)]
StoreDep = Annotated[BlobStore, Depends(get_store)]


async def get_file_service(session: SessionDep, store: StoreDep, settings: SettingsDep) -> FileService:
    return FileService(session, store, settings)


FileServiceDep = Annotated[FileService, Depends(get_file_service)]


async def get_batch_service(session: SessionDep, settings: SettingsDep) -> BatchService:
    return BatchService(session, settings)


BatchServiceDep = Annotated[BatchService, Depends(get_batch_service)]


async def get_upload_service(
    request: Request, session: SessionDep, store: StoreDep, settings: SettingsDep
) -> UploadService:
    return UploadService(session, store, settings, request.app.state.db)


UploadServiceDep = Annotated[UploadService, Depends(get_upload_service)]
