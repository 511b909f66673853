"""Batches API wire models, named exactly as OpenAI's (openai-python `types/batch.py`)."""

from __future__ import annotations

from typing import Annotated, Any, Literal

from pydantic import BaseModel, BeforeValidator, ConfigDict, Field, JsonValue

from app.core.config import Settings
from app.core.endpoints import OPENAI_BATCH_ENDPOINTS, normalize_endpoint
from app.core.statuses import BatchStatus
from app.db.models import Batch
from app.schemas.common import LiteralOf


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
    seconds: int = Field(ge=3600, le=2_592_000)


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

    @classmethod
    def from_row(cls, b: Batch) -> BatchObject:
        return cls(
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
        )
