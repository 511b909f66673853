"""Webhook endpoint wire models, named as OpenAI's (openai-python `types/webhooks/`).

`status` and `disabled_reason` are batchd's additions: an endpoint batchd disabled after failing
for too long is shown as such (the client keeps unknown fields on its objects)."""

from __future__ import annotations

from typing import Annotated, Any, Literal, Self

from pydantic import BaseModel, ConfigDict

from app.core.statuses import WebhookEndpointStatus
from app.core.webhook_signing import secret_hint
from app.db.models import WebhookEndpoint
from app.schemas.common import LiteralOf

# The events batchd sends (OpenAI's batch webhook events).
BATCH_EVENT_TYPES = ("batch.completed", "batch.failed", "batch.cancelled", "batch.expired")
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


def _json_body(schema: dict, *, required: bool) -> dict:
    return {"requestBody": {"required": required, "content": {"application/json": {"schema": schema}}}}


# The bodies as documented (/openapi.json): what the service accepts, stated exactly (the parsing
# models above are loose so the service answers with its own messages). Whether a URL's host may
# receive webhooks (it must resolve to a public address unless BATCHD_WEBHOOK_ALLOW_HOSTS lists
# it) depends on DNS, which no schema states: that is a 400 the documents describe in words.
_URL = {
    "type": "string",
    "maxLength": MAX_URL,
    "pattern": "^https?://[A-Za-z0-9-]{1,63}(\\.[A-Za-z0-9-]{1,63})*(:[0-9]{1,4})?(/[^\\s]*)?$",
    "examples": ["https://example.com/webhooks/batchd"],
}
_NAME = {"type": "string", "minLength": 1, "maxLength": MAX_NAME, "pattern": "\\S"}
_EVENT_TYPES = {"type": "array", "minItems": 1, "items": {"type": "string", "enum": list(BATCH_EVENT_TYPES)}}
WEBHOOK_CREATE_OPENAPI = _json_body(
    {
        "type": "object",
        "required": ["url", "name", "event_types"],
        "properties": {"url": _URL, "name": _NAME, "event_types": _EVENT_TYPES},
    },
    required=True,
)
WEBHOOK_UPDATE_OPENAPI = _json_body(
    {
        "type": ["object", "null"],
        "properties": {
            "url": {"type": ["string", "null"], **{k: v for k, v in _URL.items() if k != "type"}},
            "name": {"type": ["string", "null"], **{k: v for k, v in _NAME.items() if k != "type"}},
            "event_types": {**_EVENT_TYPES, "type": ["array", "null"]},
            "status": {"type": ["string", "null"], "enum": [*(s.value for s in WebhookEndpointStatus), None]},
        },
    },
    required=False,
)
ROTATE_SECRET_OPENAPI = _json_body(
    {"type": ["object", "null"], "properties": {"keep_old_secret_active_for_24_hours": {"type": ["boolean", "null"]}}},
    required=False,
)
TEST_EVENT_OPENAPI = _json_body(
    {
        "type": "object",
        "required": ["event_type"],
        "properties": {"event_type": {"type": "string", "enum": list(BATCH_EVENT_TYPES)}},
    },
    required=True,
)
