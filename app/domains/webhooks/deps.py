"""The webhooks domain's service, one per request."""

from __future__ import annotations

from typing import Annotated

from fastapi import Depends

from app.api.deps import SessionDep, SettingsDep
from app.domains.webhooks.service import WebhookService


async def get_webhook_service(session: SessionDep, settings: SettingsDep) -> WebhookService:
    return WebhookService(session, settings)


WebhookServiceDep = Annotated[WebhookService, Depends(get_webhook_service)]
