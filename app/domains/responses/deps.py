"""The background Responses service, one per request."""

from __future__ import annotations

from typing import Annotated

from fastapi import Depends

from app.api.deps import SessionDep, SettingsDep, StoreDep
from app.domains.responses.service import BackgroundResponseService


async def get_background_response_service(
    session: SessionDep, store: StoreDep, settings: SettingsDep
) -> BackgroundResponseService:
    return BackgroundResponseService(session, store, settings)


BackgroundResponseServiceDep = Annotated[BackgroundResponseService, Depends(get_background_response_service)]
