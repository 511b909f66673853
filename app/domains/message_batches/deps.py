"""The Message Batches service, one per request."""

from __future__ import annotations

from typing import Annotated

from fastapi import Depends

from app.api.deps import SessionDep, SettingsDep, StoreDep
from app.domains.message_batches.service import MessageBatchService


async def get_message_batch_service(session: SessionDep, store: StoreDep, settings: SettingsDep) -> MessageBatchService:
    return MessageBatchService(session, store, settings)


MessageBatchServiceDep = Annotated[MessageBatchService, Depends(get_message_batch_service)]
