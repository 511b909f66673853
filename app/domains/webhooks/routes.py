"""Webhook endpoint routes (`/v1/webhook_endpoints`, as `client.webhooks.*` calls them)."""

from __future__ import annotations

from typing import Annotated

from fastapi import APIRouter, Body, Query

from app.api.deps import DatabaseDep, SettingsDep
from app.domains.organization.deps import ProjectDep
from app.domains.webhooks.deps import WebhookServiceDep
from app.domains.webhooks.schemas import (
    BATCH_EVENT_TYPES,
    EventTypeList,
    RotateSecretParams,
    RotateSecretRequest,
    TestEventParams,
    TestRequest,
    WebhookEndpointCreate,
    WebhookEndpointCreateParams,
    WebhookEndpointDeleted,
    WebhookEndpointObject,
    WebhookEndpointUpdate,
    WebhookEndpointUpdateParams,
    WebhookEndpointWithSecret,
    WebhookTestResult,
)
from app.domains.webhooks.service import send_test_event
from app.schemas.common import ERROR_RESPONSES, ListPage, Responses, error_doc, json_body

router = APIRouter(tags=["webhooks"], responses=ERROR_RESPONSES)


def _with_secret(row) -> WebhookEndpointWithSecret:
    return WebhookEndpointWithSecret.from_row(row, signing_secret=row.secret)


# Whether a receiver's host may get webhooks depends on DNS, which no schema states.
_URL_REFUSED: Responses = {400: error_doc("Invalid request, or a `url` whose host is not public or does not resolve")}


@router.post(
    "/webhook_endpoints",
    response_model=WebhookEndpointWithSecret,
    openapi_extra=json_body(WebhookEndpointCreateParams),
    responses=_URL_REFUSED,
)
async def create_endpoint(
    project: ProjectDep,
    hooks: WebhookServiceDep,
    body: Annotated[WebhookEndpointCreate | None, Body()] = None,
) -> WebhookEndpointWithSecret:
    """Register a receiver; the response carries its signing secret, shown this once."""
    return _with_secret(await hooks.create(project, body or WebhookEndpointCreate()))


@router.get("/webhook_endpoints", response_model=ListPage[WebhookEndpointObject])
async def list_endpoints(
    project: ProjectDep,
    hooks: WebhookServiceDep,
    after: str | None = None,
    limit: Annotated[int, Query(ge=1, le=100)] = 20,
) -> ListPage[WebhookEndpointObject]:
    page = await hooks.list(project, limit=limit, after=after)
    return ListPage.of([WebhookEndpointObject.from_row(e) for e in page.items], page.has_more)


@router.get("/webhook_endpoints/{endpoint_id}", response_model=WebhookEndpointObject)
async def retrieve_endpoint(endpoint_id: str, project: ProjectDep, hooks: WebhookServiceDep) -> WebhookEndpointObject:
    return WebhookEndpointObject.from_row(await hooks.get(project, endpoint_id))


@router.post(
    "/webhook_endpoints/{endpoint_id}",
    response_model=WebhookEndpointObject,
    openapi_extra=json_body(WebhookEndpointUpdateParams, required=False),
    responses=_URL_REFUSED,
)
async def update_endpoint(
    endpoint_id: str,
    project: ProjectDep,
    hooks: WebhookServiceDep,
    body: Annotated[WebhookEndpointUpdate | None, Body()] = None,
) -> WebhookEndpointObject:
    """Change url, name or event_types; `status: "enabled"` re-enables a disabled endpoint."""
    return WebhookEndpointObject.from_row(await hooks.update(project, endpoint_id, body or WebhookEndpointUpdate()))


@router.delete("/webhook_endpoints/{endpoint_id}", response_model=WebhookEndpointDeleted)
async def delete_endpoint(endpoint_id: str, project: ProjectDep, hooks: WebhookServiceDep) -> WebhookEndpointDeleted:
    return WebhookEndpointDeleted(id=await hooks.delete(project, endpoint_id))


@router.post(
    "/webhook_endpoints/{endpoint_id}/rotate_secret",
    response_model=WebhookEndpointWithSecret,
    openapi_extra=json_body(RotateSecretParams, required=False),
)
async def rotate_secret(
    endpoint_id: str,
    project: ProjectDep,
    hooks: WebhookServiceDep,
    body: Annotated[RotateSecretRequest | None, Body()] = None,
) -> WebhookEndpointWithSecret:
    """A new secret (shown this once); the old one keeps signing for 24 h if asked."""
    body = body or RotateSecretRequest()
    return _with_secret(await hooks.rotate_secret(project, endpoint_id, body.keep_old_secret_active_for_24_hours))


@router.post(
    "/webhook_endpoints/{endpoint_id}/test",
    response_model=WebhookTestResult,
    openapi_extra=json_body(TestEventParams),
    responses={400: error_doc("Invalid request, or the receiver could not be reached")},
)
async def test_endpoint(
    endpoint_id: str,
    project: ProjectDep,
    settings: SettingsDep,
    db: DatabaseDep,
    body: Annotated[TestRequest | None, Body()] = None,
) -> WebhookTestResult:
    """Send a sample event now and report the receiver's status code."""
    event_type = (body or TestRequest()).event_type
    result = await send_test_event(db, settings, project, endpoint_id, event_type)
    return WebhookTestResult(webhook_endpoint_id=endpoint_id, event_type=event_type, status_code=result.status_code)


@router.get("/webhook_event_types", response_model=EventTypeList)
async def event_types(project: ProjectDep) -> EventTypeList:
    return EventTypeList(data=list(BATCH_EVENT_TYPES))
