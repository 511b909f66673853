"""Anthropic's API names shared by the layers: the Message Batches paths, and Anthropic's error
envelope ``{"type": "error", "error": {"type", "message"}, "request_id"}`` for those routes and
for the errored results of Message Batch requests.

Anthropic names the error by its HTTP status; every other route answers in OpenAI's envelope
(app/core/errors.py)."""

from __future__ import annotations

# The path prefix of the routes that answer in Anthropic's envelope.
ANTHROPIC_ROUTES_PREFIX = "/v1/messages"
MESSAGE_BATCHES_PATH = "/v1/messages/batches"

_TYPES_BY_STATUS = {
    400: "invalid_request_error",
    401: "authentication_error",
    403: "permission_error",
    404: "not_found_error",
    409: "invalid_request_error",
    413: "request_too_large",
    422: "invalid_request_error",
    429: "rate_limit_error",
    503: "overloaded_error",
    529: "overloaded_error",
}


def anthropic_error_type(status_code: int) -> str:
    """Anthropic's error type for an HTTP status (``api_error`` for any other failure)."""
    if status_code in _TYPES_BY_STATUS:
        return _TYPES_BY_STATUS[status_code]
    return "invalid_request_error" if 400 <= status_code < 500 else "api_error"


def anthropic_error(status_code: int, message: str, request_id: str | None = None) -> dict:
    """The envelope of one error; ``request_id`` is left out when unknown."""
    envelope: dict = {"type": "error", "error": {"type": anthropic_error_type(status_code), "message": message}}
    if request_id is not None:
        envelope["request_id"] = request_id
    return envelope


def is_anthropic_route(path: str) -> bool:
    return path == ANTHROPIC_ROUTES_PREFIX or path.startswith(ANTHROPIC_ROUTES_PREFIX + "/")
