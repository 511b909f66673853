"""The files domain's services, one per request."""

from __future__ import annotations

from typing import Annotated

from fastapi import Depends

from app.api.deps import DatabaseDep, SessionDep, SettingsDep, StoreDep
from app.domains.files.service import FileService
from app.domains.files.uploads import UploadService


async def get_file_service(session: SessionDep, store: StoreDep, settings: SettingsDep) -> FileService:
    return FileService(session, store, settings)


FileServiceDep = Annotated[FileService, Depends(get_file_service)]


async def get_upload_service(
    session: SessionDep, store: StoreDep, settings: SettingsDep, db: DatabaseDep
) -> UploadService:
    return UploadService(session, store, settings, db)


UploadServiceDep = Annotated[UploadService, Depends(get_upload_service)]
