"""Webhook endpoint wire models, named as OpenAI's (openai-python `types/webhooks/`).

`status` and `disabled_reason` are batchd's additions: an endpoint batchd disabled after failing
for too long is shown as such (the client keeps unknown fields on its objects)."""

from __future__ import annotations

from typing import Annotated, Any, Literal, Self

from pydantic import BaseModel, ConfigDict, Field

from app.core.statuses import WebhookEndpointStatus, WebhookEventType
from app.core.webhook_signing import secret_hint
from app.db.models import WebhookEndpoint
from app.schemas.common import LiteralOf

# The events batchd sends (OpenAI's batch webhook events).
BATCH_EVENT_TYPES = tuple(event.value for event in WebhookEventType)
MAX_NAME = 256
MAX_URL = 2048


class WebhookEndpointCreate(BaseModel):
    """Loosely typed on purpose: the service answers with OpenAI-style messages and codes."""

    model_config = ConfigDict(extra="allow")

    url: Any = None
    name: Any = None
    event_types: Any = None


class WebhookEndpointUpdate(WebhookEndpointCreate):
    status: Any = None


class RotateSecretRequest(BaseModel):
    model_config = ConfigDict(extra="allow")

    keep_old_secret_active_for_24_hours: Any = None


class TestRequest(BaseModel):
    model_config = ConfigDict(extra="allow")

    event_type: Any = None


class WebhookEndpointObject(BaseModel):
    id: str
    object: Literal["webhook_endpoint"] = "webhook_endpoint"
    created_at: int
    updated_at: int
    name: str
    url: str
    event_types: list[str]
    signing_secret_hint: str
    status: Annotated[str, LiteralOf(WebhookEndpointStatus)]
    disabled_reason: str | None

    @classmethod
    def from_row(cls, row: WebhookEndpoint, **extra: Any) -> Self:
        return cls(
            id=row.id,
            created_at=row.created_at,
            updated_at=row.updated_at,
            name=row.name,
            url=row.url,
            event_types=list(row.event_types),
            signing_secret_hint=secret_hint(row.secret),
            status=row.status,
            disabled_reason=row.disabled_reason,
            **extra,
        )


class WebhookEndpointWithSecret(WebhookEndpointObject):
    """Returned by create and rotate_secret only: the one time the secret is shown."""

    signing_secret: str


class WebhookEndpointDeleted(BaseModel):
    id: str
    object: Literal["webhook_endpoint.deleted"] = "webhook_endpoint.deleted"
    deleted: bool = True


class WebhookTestResult(BaseModel):
    object: Literal["webhook_endpoint.test"] = "webhook_endpoint.test"
    webhook_endpoint_id: str
    event_type: str
    status_code: int
    success: Literal[True] = True


class EventTypeList(BaseModel):
    object: Literal["list"] = "list"
    data: list[str]


# The bodies as the services enforce them (after their own checks, which word the common
# mistakes), and as /openapi.json states them. Whether a URL's host may receive webhooks (it must
# resolve to a public address unless BATCHD_OUTBOUND_ALLOW lists it) depends on DNS, which no
# schema states: that is a 400 the documents describe in words.
Url = Annotated[
    str,
    Field(
        max_length=MAX_URL,
        pattern="^https?://[A-Za-z0-9-]{1,63}(\\.[A-Za-z0-9-]{1,63})*(:[0-9]{1,5})?(/[^\\s]*)?$",
        examples=["https://example.com/webhooks/batchd"],
    ),
]
Name = Annotated[str, Field(min_length=1, max_length=MAX_NAME, pattern="\\S")]
EventType = Annotated[str, LiteralOf(BATCH_EVENT_TYPES)]
EventTypes = Annotated[list[EventType], Field(min_length=1)]


class WebhookEndpointCreateParams(BaseModel):
    """The body of `POST /v1/webhook_endpoints`."""

    model_config = ConfigDict(extra="allow")

    url: Url
    name: Name
    event_types: EventTypes


class WebhookEndpointUpdateParams(BaseModel):
    """The body of `POST /v1/webhook_endpoints/{endpoint_id}`: what is given changes;
    `status: "enabled"` re-enables a disabled endpoint."""

    model_config = ConfigDict(extra="allow")

    url: Url | None = None
    name: Name | None = None
    event_types: EventTypes | None = None
    status: Annotated[str, LiteralOf(WebhookEndpointStatus)] | None = None


class RotateSecretParams(BaseModel):
    model_config = ConfigDict(extra="allow")

    keep_old_secret_active_for_24_hours: bool | None = None


class TestEventParams(BaseModel):
    model_config = ConfigDict(extra="allow")

    event_type: EventType
