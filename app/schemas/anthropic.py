"""Anthropic's Message Batches wire shapes (the `anthropic` client's
`types/messages/*`): field names and values exactly as Anthropic's API has them."""

from __future__ import annotations

from typing import Any, Literal

from pydantic import BaseModel

MessageBatchProcessingStatus = Literal["in_progress", "canceling", "ended"]


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
    processing_status: MessageBatchProcessingStatus
    request_counts: MessageBatchRequestCounts
    created_at: str
    expires_at: str
    ended_at: str | None
    cancel_initiated_at: str | None
    archived_at: str | None
    results_url: str | None


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
    429: _error_doc("The project's active-batch limit is reached"),
}

# The request body, documented (the route reads it itself, to bound its memory).
MESSAGE_BATCH_CREATE_OPENAPI: dict = {
    "requestBody": {
        "required": True,
        "content": {
            "application/json": {
                "schema": {
                    "type": "object",
                    "required": ["requests"],
                    "properties": {
                        "requests": {
                            "type": "array",
                            "minItems": 1,
                            "items": {
                                "type": "object",
                                "required": ["custom_id", "params"],
                                "properties": {
                                    "custom_id": {"type": "string", "pattern": "^[a-zA-Z0-9_-]{1,64}$"},
                                    "params": {"type": "object", "description": "A Messages API request body."},
                                },
                            },
                        }
                    },
                }
            }
        },
    }
}
