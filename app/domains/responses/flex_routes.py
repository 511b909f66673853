"""Flex routes (`service_tier: "flex"`): `POST /v1/chat/completions`, `/v1/completions` and
`/v1/embeddings` as the `openai` client calls them; the call waits for its line to run through
the batch queue (app/domains/responses/flex.py). `POST /v1/responses` at flex priority is in responses.py."""

from __future__ import annotations

from typing import Annotated, Any

from fastapi import APIRouter, Depends, Request, Response
from fastapi.responses import JSONResponse, StreamingResponse

from app.api.deps import DatabaseDep, RuntimeDep, SettingsDep, StoreDep, not_a_create
from app.api.route_caps import CostlyRouteCaps
from app.core.endpoints import CHAT_COMPLETIONS, COMPLETIONS, EMBEDDINGS
from app.domains.organization.deps import CallerDep
from app.domains.responses.flex import ClientGone, FlexService
from app.domains.responses.flex_schemas import FlexChatCompletionParams, FlexCompletionParams, FlexEmbeddingParams
from app.domains.responses.flex_stream import STREAMED, events
from app.schemas.common import ERROR_RESPONSES, error_doc, json_body

router = APIRouter(tags=["flex"], responses=ERROR_RESPONSES)

FLEX_ERRORS: dict[int | str, dict[str, Any]] = {
    400: error_doc('Invalid request, or no `service_tier: "flex"` (batchd is not an online server)'),
    413: error_doc("Request body too large"),
    429: error_doc(
        "The line could not start within the flex wait limit (`resource_unavailable`), or too many flex "
        "requests are waiting (Retry-After)"
    ),
}
# What a flex call answers: the engine's body with `service_tier: "flex"` (JSON, or server-sent
# events built from it when a chat or Responses call asked to stream).
_JSON = {"application/json": {"schema": {"type": "object"}}}
_EVENTS = {"text/event-stream": {"schema": {"type": "string"}}}
_ANSWER: dict[int | str, dict[str, Any]] = {200: {"description": "The engine's answer", "content": _JSON}}
_STREAMED_ANSWER: dict[int | str, dict[str, Any]] = {
    200: {"description": "The engine's answer, or its events (`stream: true`)", "content": _JSON | _EVENTS}
}
# The Responses route's 200 (its JSON is the Response object) also answers a flex stream's events.
RESPONSES_STREAM = {200: {"content": _EVENTS}}


async def get_flex_service(db: DatabaseDep, store: StoreDep, settings: SettingsDep, runtime: RuntimeDep) -> FlexService:
    async def wake(batch_id: str | None) -> None:
        runtime.wake_worker(batch_id)

    return FlexService(db, store, settings, wake)


FlexServiceDep = Annotated[FlexService, Depends(get_flex_service)]


async def flex_answer(
    endpoint: str, request: Request, caller: CallerDep, flex: FlexService, caps: CostlyRouteCaps
) -> Response:
    """Wait for the flex line and answer the engine's body (or its events); 429 (Retry-After) past
    the project's or the server's cap on flex requests waiting."""
    not_a_create(request)  # the answer stays the engine's: docs/security.md
    try:
        with caps.flex_wait.slot(caller.project):
            answer = await flex.answer(
                endpoint,
                caller.project,
                await request.body(),
                api_key_id=caller.key_id,
                is_disconnected=request.is_disconnected,
            )
    except ClientGone:
        return Response(status_code=499)  # nobody reads it
    if answer.stream and endpoint in STREAMED:
        return StreamingResponse(events(endpoint, answer.body, answer.request), media_type="text/event-stream")
    return JSONResponse(answer.body, status_code=answer.status_code)


@router.post(
    "/chat/completions", openapi_extra=json_body(FlexChatCompletionParams), responses=_STREAMED_ANSWER | FLEX_ERRORS
)
async def create_chat_completion(
    request: Request, caller: CallerDep, runtime: RuntimeDep, flex: FlexServiceDep
) -> Response:
    """A chat completion at flex priority (`service_tier: "flex"`): it runs through the batch
    queue and the call waits for it; `stream: true` answers the finished result as events."""
    return await flex_answer(CHAT_COMPLETIONS, request, caller, flex, runtime.caps)


@router.post("/completions", openapi_extra=json_body(FlexCompletionParams), responses=_ANSWER | FLEX_ERRORS)
async def create_completion(request: Request, caller: CallerDep, runtime: RuntimeDep, flex: FlexServiceDep) -> Response:
    """A completion at flex priority (`service_tier: "flex"`): it runs through the batch queue
    and the call waits for it."""
    return await flex_answer(COMPLETIONS, request, caller, flex, runtime.caps)


@router.post("/embeddings", openapi_extra=json_body(FlexEmbeddingParams), responses=_ANSWER | FLEX_ERRORS)
async def create_embedding(request: Request, caller: CallerDep, runtime: RuntimeDep, flex: FlexServiceDep) -> Response:
    """Embeddings at flex priority (`service_tier: "flex"`): they run through the batch queue and
    the call waits for them."""
    return await flex_answer(EMBEDDINGS, request, caller, flex, runtime.caps)
