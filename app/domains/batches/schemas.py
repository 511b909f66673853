"""Batches API wire models, named exactly as OpenAI's (openai-python `types/batch.py`)."""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from typing import Annotated, Any, Literal

from pydantic import (
    BaseModel,
    BeforeValidator,
    ConfigDict,
    Field,
    JsonValue,
    ValidationInfo,
    field_validator,
    model_validator,
)

from app.core.config import Settings
from app.core.endpoints import OPENAI_BATCH_ENDPOINTS, normalize_endpoint
from app.core.statuses import BatchStatus, ExportStatus, WebhookEventType
from app.db.models import Batch
from app.domains.webhooks.schemas import Url as WebhookUrl
from app.schemas.common import ExpirySeconds, LiteralOf, invalid_value, not_one_of


class BatchCreateRequest(BaseModel):
    """Fields are typed loosely on purpose: the service validates the body with
    BatchCreateParams, which answers with OpenAI's exact messages and codes."""

    model_config = ConfigDict(extra="allow")  # tolerate unknown keys (LiteLLM adds its own)

    input_file_id: Any = None
    endpoint: Any = None
    completion_window: Any = None
    metadata: Any = None
    output_expires_after: Any = None
    allow_mixed_models: Any = None
    webhook: Any = None
    output_order: Any = None
    output_uri: Any = None
    output_urls: Any = None


_DEFAULT_WINDOWS: list[JsonValue] = list(Settings.model_fields["completion_windows"].default.split(","))

# OpenAI's bounds of a batch's metadata: pairs, and each key's and value's characters.
MAX_METADATA_PAIRS = 16
MAX_METADATA_KEY = 64
MAX_METADATA_VALUE = 512

# The validation context's key for the server's completion windows (BATCHD_COMPLETION_WINDOWS).
WINDOWS = "windows"


def _batch_endpoint(value: Any) -> Any:
    """An endpoint as OpenAI or Azure spells it (`/chat/completions`), canonical."""
    endpoint = normalize_endpoint(value)
    if endpoint is None or endpoint not in OPENAI_BATCH_ENDPOINTS:
        raise not_one_of(OPENAI_BATCH_ENDPOINTS)
    return endpoint


# The events a batch's own webhook may ask for (its endings): all of them unless it names some.
BATCH_WEBHOOK_EVENTS = [event.value for event in WebhookEventType if event.value.startswith("batch.")]


class BatchWebhookParams(BaseModel):
    """batchd's `webhook` of a create body: an endpoint for this batch's ending alone, signed and
    retried as a project's endpoints are, removed once its event is sent."""

    url: WebhookUrl
    events: Annotated[list[Literal[tuple(BATCH_WEBHOOK_EVENTS)]], Field(min_length=1)] = Field(  # type: ignore[valid-type]
        default_factory=lambda: list(BATCH_WEBHOOK_EVENTS)
    )


class BatchWebhook(BaseModel):
    """The batch's own webhook endpoint, in the create response only: its signing secret is shown once."""

    id: str
    url: str
    events: list[str]
    secret: str


class OutputExpiresAfter(BaseModel):
    anchor: Literal["created_at"]
    seconds: ExpirySeconds


# Results by reference (batchd's): the longest destination accepted (a presigned URL with a
# session token runs past 2 KB), and the file kinds an `output_urls` object may name.
MAX_OUTPUT_URL = 8192
EXPORT_KINDS = ("output", "error")


def _output_uri(value: Any) -> Any:
    if isinstance(value, str) and not value.startswith("s3://"):
        raise invalid_value("expected an s3://bucket/prefix/ URI")
    return value


def _put_url(value: Any) -> Any:
    if isinstance(value, str) and not re.match(r"^https?://[^\s/?#]+", value, re.IGNORECASE):
        raise invalid_value("expected an http(s) URL")
    return value


PutUrl = Annotated[str, Field(max_length=MAX_OUTPUT_URL), BeforeValidator(_put_url)]


class BatchOutputUrls(BaseModel):
    """batchd's `output_urls` of a create body: a presigned PUT URL for the output file, the
    error file, or both; a file the batch does not have is skipped."""

    model_config = ConfigDict(extra="forbid")

    output: PutUrl | None = None
    error: PutUrl | None = None

    @model_validator(mode="after")
    def _one_at_least(self) -> BatchOutputUrls:
        if self.output is None and self.error is None:
            raise invalid_value("name an 'output' or an 'error' URL")
        return self


# OpenAI reads a required parameter that is null or empty as one not given.
_REQUIRED = ("input_file_id", "endpoint", "completion_window")


class BatchCreateParams(BaseModel):
    """The body of `POST /v1/batches`. Bounds are OpenAI's; `endpoint` may also be spelled the
    Azure way (`/chat/completions`); `completion_window` is one of the server's configured
    windows (default `24h`, `1h`)."""

    # The one contract of a create body: the service validates every body with this model (its
    # errors in OpenAI's words: app/core/errors.py), and /openapi.json states exactly its schema.

    model_config = ConfigDict(extra="allow")  # unknown keys are tolerated (LiteLLM adds its own)

    input_file_id: str = Field(min_length=1)
    endpoint: Annotated[str, LiteralOf(sorted(OPENAI_BATCH_ENDPOINTS)), BeforeValidator(_batch_endpoint)]
    # The windows are a setting, given in the validation context; the document lists the default ones.
    completion_window: str = Field(json_schema_extra={"enum": _DEFAULT_WINDOWS})
    metadata: (
        dict[
            Annotated[str, Field(max_length=MAX_METADATA_KEY)],
            Annotated[str, Field(max_length=MAX_METADATA_VALUE)],
        ]
        | None
    ) = Field(default=None, max_length=MAX_METADATA_PAIRS)
    output_expires_after: OutputExpiresAfter | None = None
    # batchd's: lines may name different models (each runs on its own; one the project cannot
    # use fails alone, in the error file). Without it, every line names the batch's model.
    allow_mixed_models: bool | None = None
    webhook: BatchWebhookParams | None = None
    # batchd's: "input" lists the output and error files' lines in input order.
    output_order: Literal["completion", "input"] | None = None
    # batchd's results by reference: where the output and error files are copied once the batch
    # ends, an allowed `s3://bucket/prefix/` (checked by the service) or presigned PUT URLs.
    output_uri: Annotated[str, Field(min_length=6, max_length=MAX_OUTPUT_URL), BeforeValidator(_output_uri)] | None = (
        None
    )
    output_urls: BatchOutputUrls | None = None

    @model_validator(mode="before")
    @classmethod
    def _null_is_missing(cls, data: Any) -> Any:
        if isinstance(data, dict):
            return {key: value for key, value in data.items() if not (key in _REQUIRED and value in (None, ""))}
        return data

    @field_validator("completion_window", mode="before")
    @classmethod
    def _configured_window(cls, value: Any, info: ValidationInfo) -> Any:
        windows = (info.context or {}).get(WINDOWS, _DEFAULT_WINDOWS)
        # isinstance first: an object or list is unhashable
        if not isinstance(value, str) or value not in windows:
            raise not_one_of(windows)
        return value


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


class BatchExportError(BaseModel):
    code: str
    message: str


class BatchExport(BaseModel):
    """batchd's: the copy of a batch's files to its `output_uri` or `output_urls`. `pending` until
    the batch has ended and its files are copied (attempts retried with backoff), then
    `completed`, or `failed` with the last attempt's error."""

    status: ExportStatus
    # The S3 prefix the files go under, or the kinds of file given a URL (the URLs carry signatures).
    output_uri: str | None = Field(default=None, exclude_if=lambda value: value is None)
    output_urls: list[str] | None = Field(default=None, exclude_if=lambda value: value is None)
    attempts: int
    error: BatchExportError | None


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
    # batchd's: set (true) on a batch created with it; others leave the key out.
    allow_mixed_models: bool | None = Field(default=None, exclude_if=lambda value: not value)
    # batchd's: the batch's own webhook endpoint with its secret, in the create response only.
    webhook: BatchWebhook | None = Field(default=None, exclude_if=lambda value: value is None)
    # batchd's: the files' line order, shown only when asked for ("input"), so every other batch
    # is exactly OpenAI's object.
    output_order: Literal["input"] | None = Field(default=None, exclude_if=lambda value: value is None)
    # batchd's: when the running batch was paused (`POST /v1/batches/{id}/pause`), only while it is.
    paused_at: int | None = Field(default=None, exclude_if=lambda value: value is None)
    # batchd's: the copy of the files to `output_uri` / `output_urls`, on a batch created with one.
    export: BatchExport | None = Field(default=None, exclude_if=lambda value: value is None)

    @classmethod
    def from_row(cls, b: Batch, *, show_project: bool = False, webhook: BatchWebhook | None = None) -> BatchObject:
        return cls(
            webhook=webhook,
            project=b.project if show_project else None,
            allow_mixed_models=True if b.allow_mixed_models else None,
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
            output_order="input" if b.output_order == "input" else None,
            paused_at=b.paused_at if b.status == BatchStatus.IN_PROGRESS else None,
            export=_export_of(b),
        )


def _export_of(b: Batch) -> BatchExport | None:
    if b.export_status is None:
        return None
    error = b.export_error
    return BatchExport(
        status=ExportStatus(b.export_status),
        output_uri=b.output_uri,
        output_urls=[kind for kind in EXPORT_KINDS if kind in b.output_urls] if b.output_urls else None,
        attempts=b.export_attempts or 0,
        error=BatchExportError(code=error["code"], message=error["message"]) if error else None,
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
    when it would finish, with nothing created. When the batch would fail (line errors, or a
    project's enqueued-token or daily limit), `errors` holds what the failed batch's would and
    `feasible` is false; with line errors the counts are null, past a limit nothing is projected.
    Times are unix seconds, null when no rate is known."""

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
    feasible: bool | None  # would finish before expires_at (false: would fail, see errors)
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
                "maxProperties": MAX_METADATA_PAIRS,
                "propertyNames": {"minLength": 1},
                "additionalProperties": {"type": "string"},
            },
        },
    ]
}
