"""Background Responses routes (OpenAI `/v1/responses`): the `openai` client's
`client.responses.create(..., background=True)`, `.retrieve`, `.cancel` and `.delete`."""

from __future__ import annotations

from fastapi import APIRouter, Request, Response

from app.api.deps import RuntimeDep, WakeDep
from app.core.endpoints import RESPONSES
from app.domains.organization.deps import CallerDep, ProjectDep
from app.domains.responses.deps import BackgroundResponseServiceDep
from app.domains.responses.flex import is_flex
from app.domains.responses.flex_routes import FLEX_ERRORS, RESPONSES_STREAM, FlexServiceDep, flex_answer
from app.domains.responses.schemas import ResponseCreateParams, ResponseDeleted, ResponseObject
from app.schemas.common import ERROR_RESPONSES, error_doc, json_body

router = APIRouter(prefix="/responses", tags=["responses"], responses=ERROR_RESPONSES)


@router.post(
    "",
    response_model=ResponseObject,
    openapi_extra=json_body(ResponseCreateParams),
    responses=RESPONSES_STREAM
    | FLEX_ERRORS
    | {
        429: error_doc(
            "The project's active-batch limit is reached, too many creates are in progress (Retry-After), "
            "or a flex request could not start in time"
        )
    },
)
async def create_response(
    request: Request,
    caller: CallerDep,
    runtime: RuntimeDep,
    responses: BackgroundResponseServiceDep,
    wake_worker: WakeDep,
    flex: FlexServiceDep,
) -> ResponseObject | Response:
    """Queue a background response (`background: true`): it answers at once, `queued`; poll it
    with GET. With `service_tier: "flex"` instead, the call waits for the response (streamed as
    events once done when `stream: true`). Anything else is a 400: online traffic belongs to
    `vllm serve`."""
    body = await request.body()
    if is_flex(body):
        return await flex_answer(RESPONSES, request, caller, flex, runtime.caps)
    with runtime.caps.background_response_create.slot(caller.project):
        created = await responses.create(caller.project, body, api_key_id=caller.key_id)
    wake_worker()
    return ResponseObject.model_validate(created)


@router.get("/{response_id}", response_model=ResponseObject)
async def retrieve_response(
    response_id: str, project: ProjectDep, responses: BackgroundResponseServiceDep
) -> ResponseObject:
    """The response: `queued`, `in_progress`, then `completed` (or `incomplete`) with `output`
    and `usage`, `failed` with `error`, or `cancelled`."""
    return ResponseObject.model_validate(await responses.get(project, response_id))


@router.post("/{response_id}/cancel", response_model=ResponseObject)
async def cancel_response(
    response_id: str, project: ProjectDep, responses: BackgroundResponseServiceDep, wake_worker: WakeDep
) -> ResponseObject:
    """`cancelled` at once if queued or running; a response that has ended is returned as it is."""
    cancelled = await responses.cancel(project, response_id)
    wake_worker(response_id)
    return ResponseObject.model_validate(cancelled)


@router.delete(
    "/{response_id}",
    response_model=ResponseDeleted,
    responses={409: error_doc("The response is queued or running: cancel it first")},
)
async def delete_response(
    response_id: str, project: ProjectDep, responses: BackgroundResponseServiceDep
) -> ResponseDeleted:
    """Delete an ended response (cancel a running one first); its id is then unknown (404)."""
    return ResponseDeleted(id=await responses.delete(project, response_id))
