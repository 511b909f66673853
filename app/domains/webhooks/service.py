"""Webhook endpoints of a project: create (the secret is shown once), read, list, update,
delete, rotate the secret, send a test event. Rules and checks live here; SQL in the repository."""

from __future__ import annotations

import time
import uuid

from sqlalchemy.ext.asyncio import AsyncSession

from app.core.config import Settings
from app.core.errors import InvalidRequest, MissingParameter
from app.core.outbound import guarded_client
from app.core.statuses import WebhookEndpointStatus, WebhookEventType
from app.core.webhook_signing import new_secret
from app.db.engine import Database
from app.db.models import WebhookEndpoint
from app.db.repositories.base import Page, UnknownCursor
from app.domains.lookup import WEBHOOK_ENDPOINT, get_or_404
from app.domains.webhooks import urls as webhook_urls
from app.domains.webhooks.delivery import AttemptResult, secrets_in_use, send_once
from app.domains.webhooks.endpoints_repository import WebhookEndpointRepository
from app.domains.webhooks.outbox import event_body, new_event_id
from app.domains.webhooks.schemas import (
    BATCH_EVENT_TYPES,
    MAX_NAME,
    RotateSecretParams,
    TestEventParams,
    WebhookEndpointCreate,
    WebhookEndpointCreateParams,
    WebhookEndpointUpdate,
    WebhookEndpointUpdateParams,
)
from app.schemas.common import validated

ROTATION_GRACE_SECONDS = 24 * 3600


def new_endpoint_id() -> str:
    return f"we_{uuid.uuid4().hex}"


class WebhookService:
    def __init__(self, session: AsyncSession, settings: Settings) -> None:
        self.session = session
        self.repo = WebhookEndpointRepository(session)
        self.settings = settings

    async def _url(self, url: object) -> str:
        try:
            return await webhook_urls.check(url, self.settings.outbound_policy())
        except webhook_urls.UnsafeUrl as exc:
            raise InvalidRequest(f"Invalid 'url': {exc}", param="url", code="invalid_url") from None

    @staticmethod
    def _name(name: object) -> str:
        if not isinstance(name, str) or not name.strip() or len(name) > MAX_NAME:
            raise InvalidRequest(
                f"Invalid 'name': expected a non-empty string of at most {MAX_NAME} characters.",
                param="name",
                code="invalid_value",
            )
        return name

    @staticmethod
    def _event_types(event_types: object) -> list[str]:
        if not isinstance(event_types, list) or not event_types or not all(isinstance(t, str) for t in event_types):
            raise InvalidRequest(
                "Invalid 'event_types': expected a non-empty array of event types.",
                param="event_types",
                code="invalid_value",
            )
        unknown = [t for t in event_types if t not in BATCH_EVENT_TYPES]
        if unknown:
            raise InvalidRequest(
                f"Invalid 'event_types': {unknown[0]!r} is not sent by this server. Supported: "
                + ", ".join(BATCH_EVENT_TYPES)
                + ".",
                param="event_types",
                code="invalid_value",
            )
        return list(dict.fromkeys(event_types))

    async def create(self, project: str, request: WebhookEndpointCreate) -> WebhookEndpoint:
        for field in ("url", "name", "event_types"):
            if getattr(request, field) is None:
                raise MissingParameter(field)
        now = int(time.time())
        endpoint = WebhookEndpoint(
            id=new_endpoint_id(),
            project=project,
            name=self._name(request.name),
            url=await self._url(request.url),
            event_types=self._event_types(request.event_types),
            secret=new_secret(),
            status=WebhookEndpointStatus.ENABLED,
            created_at=now,
            updated_at=now,
        )
        validated(WebhookEndpointCreateParams, request.model_dump())  # what /openapi.json states
        return await self.repo.add(endpoint)

    async def get(self, project: str, endpoint_id: str) -> WebhookEndpoint:
        return await get_or_404(self.repo, project, endpoint_id, WEBHOOK_ENDPOINT)

    async def list(self, project: str, *, limit: int, after: str | None) -> Page[WebhookEndpoint]:
        """Newest first."""
        try:
            return await self.repo.page(project, after=after, limit=limit)
        except UnknownCursor:
            raise WEBHOOK_ENDPOINT.not_found(after, param="after") from None

    async def update(self, project: str, endpoint_id: str, request: WebhookEndpointUpdate) -> WebhookEndpoint:
        # The URL check resolves DNS: do it before the first query opens the (write) transaction.
        url = await self._url(request.url) if request.url is not None else None
        endpoint = await self.get(project, endpoint_id)
        changed = False
        if request.name is not None and request.name != endpoint.name:
            endpoint.name, changed = self._name(request.name), True
        if url is not None and url != endpoint.url:
            endpoint.url, changed = url, True
        if request.event_types is not None:
            event_types = self._event_types(request.event_types)
            if event_types != endpoint.event_types:
                endpoint.event_types, changed = event_types, True
        if request.status is not None:
            if request.status not in list(WebhookEndpointStatus):
                raise InvalidRequest(
                    "Invalid 'status': expected 'enabled' or 'disabled'.", param="status", code="invalid_value"
                )
            status = WebhookEndpointStatus(request.status)
            if status != endpoint.status:
                endpoint.status, changed = status, True
                endpoint.disabled_reason = None if status == WebhookEndpointStatus.ENABLED else "Disabled by its owner."
                endpoint.failing_since = None
        validated(WebhookEndpointUpdateParams, request.model_dump())  # what /openapi.json states
        if changed:
            endpoint.updated_at = int(time.time())
            await self.session.flush()
        return endpoint

    async def delete(self, project: str, endpoint_id: str) -> str:
        endpoint = await self.get(project, endpoint_id)
        await self.repo.delete(endpoint)
        return endpoint_id

    async def rotate_secret(self, project: str, endpoint_id: str, keep_old: object) -> WebhookEndpoint:
        if keep_old is not None and not isinstance(keep_old, bool):
            raise InvalidRequest(
                "Invalid 'keep_old_secret_active_for_24_hours': expected a boolean.",
                param="keep_old_secret_active_for_24_hours",
                code="invalid_type",
            )
        validated(RotateSecretParams, {"keep_old_secret_active_for_24_hours": keep_old})  # the documented body
        endpoint = await self.get(project, endpoint_id)
        now = int(time.time())
        endpoint.previous_secret = endpoint.secret if keep_old else None
        endpoint.previous_secret_expires_at = now + ROTATION_GRACE_SECONDS if keep_old else None
        endpoint.secret = new_secret()
        endpoint.updated_at = now
        await self.session.flush()
        return endpoint


async def send_test_event(
    db: Database, settings: Settings, project: str, endpoint_id: str, event_type: object
) -> AttemptResult:
    """POST a sample event now (not through the outbox) and return the receiver's answer. Reads
    the endpoint in its own short read session: no transaction stays open across the request."""
    if event_type is None:
        raise MissingParameter("event_type")
    if event_type not in BATCH_EVENT_TYPES:
        raise InvalidRequest(
            "Invalid 'event_type': expected one of " + ", ".join(BATCH_EVENT_TYPES) + ".",
            param="event_type",
            code="invalid_value",
        )
    validated(TestEventParams, {"event_type": event_type})  # the documented body
    async with db.read() as session:
        endpoint = await WebhookService(session, settings).get(project, endpoint_id)
    event_id, now = new_event_id(), int(time.time())
    sample_id = "resp_test" if event_type.startswith("response.") else "batch_test"
    body = event_body(event_id, WebhookEventType(event_type), now, sample_id).encode()
    secrets = secrets_in_use(endpoint.secret, endpoint.previous_secret, endpoint.previous_secret_expires_at, now)
    async with guarded_client(settings.outbound_policy(), timeout=settings.webhook_timeout_seconds) as client:
        result = await send_once(client, endpoint.url, secrets, event_id, body, settings.webhook_timeout_seconds)
    if result.status_code is None:
        raise InvalidRequest(
            f"The test event could not be delivered: {result.error}", param="url", code="webhook_unreachable"
        )
    return result
