"""Anthropic's Message Batches wire shapes (the `anthropic` client's
`types/messages/*`): field names and values exactly as Anthropic's API has them."""

from __future__ import annotations

from typing import Annotated, Any, Literal

from pydantic import BaseModel, Field

from app.core.statuses import MessageBatchStatus
from app.schemas.common import LiteralOf


class MessageBatchRequest(BaseModel):
    custom_id: str = Field(pattern="^[a-zA-Z0-9_-]{1,64}$")
    params: dict[str, Any] = Field(description="A Messages API request body.")


class MessageBatchCreateParams(BaseModel):
    """The body of `POST /v1/messages/batches`. Each custom_id is unique within the list, and the
    list has at most the server's BATCHD_MAX_MESSAGE_BATCH_REQUESTS items (checked by the service)."""

    # The service validates every body with this model after its own checks (which word the
    # common mistakes as Anthropic does), and /openapi.json states exactly its schema.
    requests: list[MessageBatchRequest] = Field(min_length=1)


class MessageBatchRequestCounts(BaseModel):
    """Tallies of the batch's requests; they always add up to the number of requests."""

    processing: int
    succeeded: int
    errored: int
    canceled: int
    expired: int


class MessageBatch(BaseModel):
    """Timestamps are RFC 3339 strings; every key is present (null where unset)."""

    id: str
    type: Literal["message_batch"] = "message_batch"
    processing_status: Annotated[str, LiteralOf(MessageBatchStatus)]
    request_counts: MessageBatchRequestCounts
    created_at: str
    expires_at: str
    ended_at: str | None
    cancel_initiated_at: str | None
    archived_at: str | None
    results_url: str | None
    # batchd's: when the batch was paused (`POST /v1/messages/batches/{id}/pause`), only while it is.
    paused_at: str | None = Field(default=None, exclude_if=lambda value: value is None)


class MessageBatchList(BaseModel):
    """A page of Message Batches, newest first."""

    data: list[MessageBatch]
    has_more: bool
    first_id: str | None
    last_id: str | None


class DeletedMessageBatch(BaseModel):
    id: str
    type: Literal["message_batch_deleted"] = "message_batch_deleted"


class AnthropicErrorObject(BaseModel):
    type: str
    message: str


class AnthropicErrorResponse(BaseModel):
    """Anthropic's error envelope, used by every non-2xx response of these routes."""

    type: Literal["error"] = "error"
    error: AnthropicErrorObject
    request_id: str | None = None


def _error_doc(description: str) -> dict[str, Any]:
    return {"model": AnthropicErrorResponse, "description": description}


ANTHROPIC_ERROR_RESPONSES: dict[int | str, dict[str, Any]] = {
    400: _error_doc("Invalid request"),
    401: _error_doc("Missing or invalid API key"),
    404: _error_doc("Not found"),
    503: _error_doc("Temporarily unavailable (retry)"),
}
CREATE_ERROR_RESPONSES: dict[int | str, dict[str, Any]] = {
    413: _error_doc("Request body too large"),
    429: _error_doc("The project's active-batch limit is reached, or too many creates are in progress (Retry-After)"),
}
