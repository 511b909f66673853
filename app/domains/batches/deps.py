"""The batches domain's services, one per request."""

from __future__ import annotations

from typing import Annotated

from fastapi import Depends

from app.api.deps import DatabaseDep, SessionDep, SettingsDep, StoreDep
from app.domains.batches.results import BatchResultsService
from app.domains.batches.service import BatchService


async def get_batch_service(session: SessionDep, settings: SettingsDep, store: StoreDep) -> BatchService:
    return BatchService(session, settings, store)


BatchServiceDep = Annotated[BatchService, Depends(get_batch_service)]


async def get_batch_results_service(session: SessionDep, db: DatabaseDep, store: StoreDep) -> BatchResultsService:
    return BatchResultsService(session, db, store)


BatchResultsServiceDep = Annotated[BatchResultsService, Depends(get_batch_results_service)]
