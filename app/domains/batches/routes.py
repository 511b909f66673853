"""Batches API routes (OpenAI `/v1/batches`)."""

from __future__ import annotations

from typing import Annotated, Any, Literal

from fastapi import APIRouter, Body, Query, Request
from fastapi.responses import StreamingResponse
from fastapi.routing import APIRoute
from starlette.routing import Match
from starlette.types import Scope

from app.api.deps import RuntimeDep, WakeDep
from app.core.statuses import LineOutcome
from app.domains.batches.deps import BatchResultsServiceDep, BatchServiceDep
from app.domains.batches.estimate import BatchEstimator
from app.domains.batches.results import ResultsQuery
from app.domains.batches.schemas import (
    BATCH_LIST_FILTERS_OPENAPI,
    BatchCreateParams,
    BatchCreateRequest,
    BatchDeleted,
    BatchEstimate,
    BatchListQuery,
    BatchObject,
    BatchRetryParams,
    BatchRetryRequest,
)
from app.domains.organization.deps import CallerDep, ListScopeDep, ProjectDep
from app.schemas.common import ERROR_RESPONSES, ListPage, error_doc, json_body

ESTIMATE = "estimate"


class BatchRoute(APIRoute):
    """A route of this router, where `estimate` is no batch id: /batches/estimate is the quote's
    path alone, so a GET or DELETE there is a 405 (Allow: POST) rather than a batch lookup."""

    def matches(self, scope: Scope) -> tuple[Match, Scope]:
        match, child = super().matches(scope)
        if match is not Match.NONE and child.get("path_params", {}).get("batch_id") == ESTIMATE:
            return Match.NONE, {}
        return match, child


router = APIRouter(prefix="/batches", tags=["batches"], responses=ERROR_RESPONSES, route_class=BatchRoute)


@router.post(
    "",
    response_model=BatchObject,
    openapi_extra=json_body(BatchCreateParams),
    responses={
        403: error_doc("The output_uri is under no S3 prefix the project may write to (uri_not_allowed)"),
        413: error_doc("Request body too large"),
        429: error_doc("The project's active-batch limit is reached"),
    },
)
async def create_batch(
    caller: CallerDep,
    batches: BatchServiceDep,
    wake_worker: WakeDep,
    body: Annotated[BatchCreateRequest | None, Body()] = None,
) -> BatchObject:
    """Create a batch from an uploaded `purpose=batch` file; it starts in `validating`."""
    batch = await batches.create(caller.project, body or BatchCreateRequest(), api_key_id=caller.key_id)
    wake_worker()
    return BatchObject.from_row(batch, webhook=batches.webhook)


@router.post(
    f"/{ESTIMATE}",
    response_model=BatchEstimate,
    openapi_extra=json_body(BatchCreateParams),
    responses={
        403: error_doc("The output_uri is under no S3 prefix the project may write to (uri_not_allowed)"),
        413: error_doc("Request body too large"),
        429: error_doc("Too many estimates in progress for the project or the server (Retry-After)"),
        503: error_doc("This replica serves no models now"),
    },
)
async def estimate_batch(
    caller: CallerDep,
    runtime: RuntimeDep,
    body: Annotated[BatchCreateRequest | None, Body()] = None,
) -> BatchEstimate:
    """A quote before submitting (batchd's, beside OpenAI's API): create's body and checks, the
    file validated as a batch's is, its lines, input tokens, output bound and cost, and when it
    would start and finish in the queue now. Creates nothing and holds no quota; line errors
    come back in `errors` as a failed batch's. 503 on a replica without engines; 429 (Retry-After)
    past the project's or the server's cap on estimates in progress."""
    estimator = BatchEstimator(
        runtime.db, runtime.settings, runtime.store, runtime.engines, runtime.worker, runtime.models
    )
    with runtime.caps.estimate.slot(caller.project):
        return await estimator.estimate(caller.project, body or BatchCreateRequest())


# Unix seconds as a database's BIGINT holds them.
UNIX_SECONDS = Query(ge=0, le=2**63 - 1)


@router.get("", response_model=ListPage[BatchObject], openapi_extra=BATCH_LIST_FILTERS_OPENAPI)
async def list_batches(
    request: Request,
    scope: ListScopeDep,
    batches: BatchServiceDep,
    after: str | None = None,
    limit: Annotated[int, Query(ge=1, le=100)] = 20,
    created_after: Annotated[int | None, UNIX_SECONDS] = None,
    created_before: Annotated[int | None, UNIX_SECONDS] = None,
    endpoint: str | None = None,
    model: str | None = None,
) -> ListPage[BatchObject]:
    """The project's batches, newest first. batchd's filters (beside OpenAI's contract): `status`,
    `metadata[key]=value`, `created_after` (inclusive) and `created_before` (exclusive) in unix
    seconds, `endpoint`, `model`; every one given must hold. An admin key may list another
    project's batches, or every project's (`project=*`); each then says its `project`."""
    params = request.query_params
    query = BatchListQuery(
        status=params.getlist("status"),
        metadata=[(k[len("metadata[") : -1], v) for k, v in params.multi_items() if _is_metadata_key(k)],
        metadata_without_key="metadata" in params,
        created_after=created_after,
        created_before=created_before,
        endpoint=endpoint,
        model=model,
    )
    page = await batches.list(scope.project, limit=limit, after=after, query=query)
    return ListPage.of([BatchObject.from_row(b, show_project=scope.by_admin) for b in page.items], page.has_more)


def _is_metadata_key(name: str) -> bool:
    return name.startswith("metadata[") and name.endswith("]")


@router.get("/{batch_id}", response_model=BatchObject)
async def retrieve_batch(batch_id: str, project: ProjectDep, batches: BatchServiceDep) -> BatchObject:
    return BatchObject.from_row(await batches.get(project, batch_id))


@router.delete(
    "/{batch_id}",
    response_model=BatchDeleted,
    responses={409: ERROR_RESPONSES[400] | {"description": "The batch has not ended"}},
)
async def delete_batch(
    batch_id: str,
    project: ProjectDep,
    batches: BatchServiceDep,
    files: Annotated[bool, Query(description="Also delete its input, output and error files.")] = False,
) -> BatchDeleted:
    """Delete an ended batch (batchd's, beside OpenAI's API). Its files stay unless `files=true`."""
    return BatchDeleted(id=await batches.delete(project, batch_id, with_files=files))


RESULTS_HEADERS = {
    "x-results-cursor": {"description": "Pass as `after` to continue after these lines.", "schema": {"type": "string"}},
    "x-batch-incomplete": {
        "description": "`true` while the batch runs (more lines may come), `false` once it has ended.",
        "schema": {"type": "string", "enum": ["true", "false"]},
    },
}


@router.get(
    "/{batch_id}/results",
    response_class=StreamingResponse,
    responses={
        200: {
            "content": {"application/jsonl": {}},
            "description": "The output and error lines finished so far (OpenAI's line format)",
            "headers": RESULTS_HEADERS,
        }
    },
)
async def batch_results(
    batch_id: str,
    project: ProjectDep,
    results: BatchResultsServiceDep,
    status: Annotated[
        Literal[LineOutcome.COMPLETED, LineOutcome.FAILED] | None, Query(description="Output lines or error lines.")
    ] = None,
    custom_id: str | None = None,
    limit: Annotated[int | None, Query(ge=1, le=2**31 - 1)] = None,
    after: Annotated[str | None, Query(description="The `x-results-cursor` of an earlier read.")] = None,
) -> StreamingResponse:
    """The batch's lines finished when the read begins (batchd's, beside OpenAI's API), while it
    runs and after, as JSONL: output lines (`status=completed`), error lines (`failed`) or both,
    at most `limit`, from the cursor `after` on. The `x-results-cursor` header continues after
    them; `x-batch-incomplete: true` while the batch runs."""
    read = await results.read(project, batch_id, ResultsQuery(status, custom_id, limit, after))
    headers = {"x-results-cursor": read.cursor, "x-batch-incomplete": "true" if read.incomplete else "false"}
    return StreamingResponse(read.lines, media_type="application/jsonl", headers=headers)


@router.post(
    "/{batch_id}/retry",
    response_model=BatchObject,
    openapi_extra=json_body(BatchRetryParams, required=False),
    responses={
        409: ERROR_RESPONSES[400] | {"description": "The batch has not ended"},
        429: error_doc("The project's active-batch limit is reached"),
    },
)
async def retry_batch(
    batch_id: str,
    caller: CallerDep,
    batches: BatchServiceDep,
    wake_worker: WakeDep,
    body: Annotated[BatchRetryRequest | None, Body()] = None,
) -> BatchObject:
    """A new batch of an ended batch's lines that did not succeed (batchd's, beside OpenAI's API):
    `{"errors": [code, ...]}` keeps only lines with those error codes. 400 when none is left."""
    batch = await batches.retry(caller.project, batch_id, body or BatchRetryRequest(), api_key_id=caller.key_id)
    wake_worker()
    return BatchObject.from_row(batch)


_NOT_RUNNING: dict[int | str, dict[str, Any]] = {
    400: ERROR_RESPONSES[400] | {"description": "The batch is not in progress"}
}


@router.post("/{batch_id}/pause", response_model=BatchObject, responses=_NOT_RUNNING)
async def pause_batch(
    batch_id: str, project: ProjectDep, batches: BatchServiceDep, wake_worker: WakeDep
) -> BatchObject:
    """batchd's: pause a running batch. It stays `in_progress` with `paused_at` set and starts
    no new line (lines in flight finish and are recorded); its expiry clock keeps running."""
    batch = await batches.pause(project, batch_id)
    wake_worker(batch.id)
    return BatchObject.from_row(batch)


@router.post("/{batch_id}/resume", response_model=BatchObject, responses=_NOT_RUNNING)
async def resume_batch(
    batch_id: str, project: ProjectDep, batches: BatchServiceDep, wake_worker: WakeDep
) -> BatchObject:
    """batchd's: resume a paused batch (`paused_at` back to null); its lines run again."""
    batch = await batches.pause(project, batch_id, paused=False)
    wake_worker()
    return BatchObject.from_row(batch)


@router.post(
    "/{batch_id}/cancel",
    response_model=BatchObject,
    responses={409: ERROR_RESPONSES[400] | {"description": "The batch is already finished"}},
)
async def cancel_batch(
    batch_id: str, project: ProjectDep, batches: BatchServiceDep, wake_worker: WakeDep
) -> BatchObject:
    """Cancel a batch: `cancelling` at once, `cancelled` once in-flight requests are aborted."""
    batch = await batches.cancel(project, batch_id)
    wake_worker(batch.id)
    return BatchObject.from_row(batch)
