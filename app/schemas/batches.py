"""Batches API wire models, named exactly as OpenAI's (openai-python `types/batch.py`)."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Annotated, Any, Literal

from pydantic import BaseModel, BeforeValidator, ConfigDict, Field, JsonValue

from app.core.config import Settings
from app.core.endpoints import OPENAI_BATCH_ENDPOINTS, normalize_endpoint
from app.core.statuses import BatchStatus
from app.db.models import Batch
from app.schemas.common import MAX_EXPIRY_SECONDS, MIN_EXPIRY_SECONDS, LiteralOf


class BatchCreateRequest(BaseModel):
    """Fields are typed loosely on purpose: the service checks them and answers with OpenAI's
    exact messages and codes instead of pydantic's."""

    model_config = ConfigDict(extra="allow")  # tolerate unknown keys (LiteLLM adds its own)

    input_file_id: Any = None
    endpoint: Any = None
    completion_window: Any = None
    metadata: Any = None
    output_expires_after: Any = None


_DEFAULT_WINDOWS: list[JsonValue] = list(Settings.model_fields["completion_windows"].default.split(","))


def _canonical_endpoint(value: Any) -> Any:
    return normalize_endpoint(value) or value


class OutputExpiresAfter(BaseModel):
    anchor: Literal["created_at"]
    seconds: int = Field(ge=MIN_EXPIRY_SECONDS, le=MAX_EXPIRY_SECONDS)


class BatchCreateParams(BaseModel):
    """The body of `POST /v1/batches`. Bounds are OpenAI's; `endpoint` may also be spelled the
    Azure way (`/chat/completions`); `completion_window` is one of the server's configured
    windows (default `24h`, `1h`)."""

    # The service validates every body with this model after its own checks (which word the
    # common mistakes as OpenAI does), and /openapi.json states exactly its schema.

    model_config = ConfigDict(extra="allow")  # unknown keys are tolerated (LiteLLM adds its own)

    input_file_id: str = Field(min_length=1)
    endpoint: Annotated[str, LiteralOf(sorted(OPENAI_BATCH_ENDPOINTS)), BeforeValidator(_canonical_endpoint)]
    # The windows are a setting (BATCHD_COMPLETION_WINDOWS), so the service checks them; the
    # document lists the default ones.
    completion_window: str = Field(json_schema_extra={"enum": _DEFAULT_WINDOWS})
    metadata: dict[Annotated[str, Field(max_length=64)], Annotated[str, Field(max_length=512)]] | None = Field(
        default=None, max_length=16
    )
    output_expires_after: OutputExpiresAfter | None = None


class BatchError(BaseModel):
    code: str | None
    message: str | None
    param: str | None
    line: int | None


class BatchErrors(BaseModel):
    object: Literal["list"] = "list"
    data: list[BatchError]


class BatchRequestCounts(BaseModel):
    total: int
    completed: int
    failed: int


class InputTokensDetails(BaseModel):
    cached_tokens: int


class OutputTokensDetails(BaseModel):
    reasoning_tokens: int


class BatchUsage(BaseModel):
    input_tokens: int
    input_tokens_details: InputTokensDetails
    output_tokens: int
    output_tokens_details: OutputTokensDetails
    total_tokens: int


class BatchObject(BaseModel):
    """Every key is always present (null where unset), as in OpenAI's responses."""

    id: str
    object: Literal["batch"] = "batch"
    endpoint: str
    model: str | None
    errors: BatchErrors | None
    input_file_id: str
    completion_window: str
    status: Annotated[str, LiteralOf(BatchStatus)]
    output_file_id: str | None
    error_file_id: str | None
    created_at: int
    in_progress_at: int | None
    expires_at: int | None
    finalizing_at: int | None
    completed_at: int | None
    failed_at: int | None
    expired_at: int | None
    cancelling_at: int | None
    cancelled_at: int | None
    request_counts: BatchRequestCounts
    usage: BatchUsage
    metadata: dict[str, str] | None
    # batchd's: the batch this one retries. Only a retry carries the key, so every other batch
    # is exactly OpenAI's object.
    retry_of: str | None = Field(default=None, exclude_if=lambda value: value is None)
    # batchd's: the batch's project, in an admin's list that names `project` (else left out).
    project: str | None = Field(default=None, exclude_if=lambda value: value is None)

    @classmethod
    def from_row(cls, b: Batch, *, show_project: bool = False) -> BatchObject:
        return cls(
            project=b.project if show_project else None,
            id=b.id,
            endpoint=b.endpoint,
            model=b.model,
            errors=BatchErrors(data=[BatchError(**e) for e in b.errors]) if b.errors else None,
            input_file_id=b.input_file_id,
            completion_window=b.completion_window,
            status=b.status,
            output_file_id=b.output_file_id,
            error_file_id=b.error_file_id,
            created_at=b.created_at,
            in_progress_at=b.in_progress_at,
            expires_at=b.expires_at,
            finalizing_at=b.finalizing_at,
            completed_at=b.completed_at,
            failed_at=b.failed_at,
            expired_at=b.expired_at,
            cancelling_at=b.cancelling_at,
            cancelled_at=b.cancelled_at,
            request_counts=BatchRequestCounts(total=b.total, completed=b.completed, failed=b.failed),
            usage=BatchUsage(
                input_tokens=b.input_tokens,
                input_tokens_details=InputTokensDetails(cached_tokens=b.cached_tokens),
                output_tokens=b.output_tokens,
                output_tokens_details=OutputTokensDetails(reasoning_tokens=b.reasoning_tokens),
                total_tokens=b.input_tokens + b.output_tokens,
            ),
            metadata=b.metadata_,
            retry_of=b.retry_of,
        )


class BatchEstimateCost(BaseModel):
    """The price of the input tokens and of the output bound at the model's prices, less its
    batch discount (as the Costs API prices usage)."""

    input: float
    output: float
    total: float
    currency: str


class BatchEstimate(BaseModel):
    """`POST /v1/batches/estimate` (batchd's): what a batch of this body would hold, cost and
    when it would finish, with nothing created. When the file has line errors, `errors` holds
    them as a failed batch's would, and the counts are null. Times are unix seconds, null when
    no rate is known."""

    object: Literal["batch.estimate"] = "batch.estimate"
    input_file_id: str
    endpoint: str
    completion_window: str
    model: str | None
    lines: int | None
    input_tokens: int | None
    # Each line's own max_tokens (or its endpoint's name for it), else the model's context
    # length less its prompt; null when a line sets none and the context length is not configured.
    max_output_tokens: int | None
    cost: BatchEstimateCost | None  # null when the model has no pricing
    lines_per_second: float | None  # the rate the projection used
    projected_start_at: int | None
    projected_finish_at: int | None
    expires_at: int
    feasible: bool | None  # would finish before expires_at
    at_risk: bool | None  # would finish in the last tenth of its window, as the scheduler counts it
    errors: BatchErrors | None


class BatchDeleted(BaseModel):
    """`DELETE /v1/batches/{batch_id}` (batchd's), shaped as OpenAI's `file.deleted`."""

    id: str
    object: Literal["batch.deleted"] = "batch.deleted"
    deleted: bool = True


class BatchRetryRequest(BaseModel):
    """Read loosely, as create's body is: the service validates it with BatchRetryParams."""

    model_config = ConfigDict(extra="allow")

    errors: Any = None


class BatchRetryParams(BaseModel):
    """The optional body of `POST /v1/batches/{batch_id}/retry` (batchd's): run again only the
    lines whose error code is listed (`batch_expired`, `batch_cancelled`, `request_timeout`, the
    code of a failed request's error, or for a batch that failed validation the codes of its
    `errors`); without it, every line that did not succeed."""

    model_config = ConfigDict(extra="allow")

    errors: list[Annotated[str, Field(min_length=1)]] | None = Field(default=None, min_length=1)


@dataclass
class BatchListQuery:
    """batchd's filters of `GET /v1/batches` as the request gave them (the service checks them).
    `status` may repeat and each may list several, comma-separated; `metadata` holds the
    `metadata[key]=value` pairs; `metadata_without_key` a bare `metadata=` (refused, as is an empty key)."""

    status: list[str] = field(default_factory=list)
    metadata: list[tuple[str, str]] = field(default_factory=list)
    metadata_without_key: bool = False
    created_after: int | None = None
    created_before: int | None = None
    endpoint: str | None = None
    model: str | None = None


_STATUS_LIST = "(" + "|".join(BatchStatus) + ")"

# The two filters FastAPI cannot declare (a comma-separated list, a deepObject), as the document
# states them (the route reads them from the query string).
BATCH_LIST_FILTERS_OPENAPI: dict[str, Any] = {
    "parameters": [
        {
            "name": "status",
            "in": "query",
            "required": False,
            "description": "Only batches with one of these statuses (repeat it, or comma-separate them).",
            "style": "form",
            "explode": True,
            "schema": {
                "type": "array",
                "items": {"type": "string", "pattern": f"^{_STATUS_LIST}(,{_STATUS_LIST})*$"},
            },
        },
        {
            "name": "metadata",
            "in": "query",
            "required": False,
            "description": "Only batches whose metadata has each of these pairs: metadata[key]=value.",
            "style": "deepObject",
            "explode": True,
            "schema": {
                "type": "object",
                "maxProperties": 16,
                "propertyNames": {"minLength": 1},
                "additionalProperties": {"type": "string"},
            },
        },
    ]
}
