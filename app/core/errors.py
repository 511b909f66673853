"""Typed API errors and OpenAI's error envelope, written once: the HTTP error handlers render
ApiErrors with it, the OpenAPI document declares it, and upstream lines without a JSON body get it."""

from __future__ import annotations

import errno

from pydantic import BaseModel


class ErrorBody(BaseModel):
    message: str
    type: str
    param: str | None
    code: str | None


class ErrorResponse(BaseModel):
    """OpenAI's error envelope, used by every non-2xx response."""

    error: ErrorBody


def error_envelope(message: str, type: str, *, param: str | None = None, code: str | None = None) -> dict:
    """`{"error": {message, type, param, code}}` as a plain dict (the shape of ErrorResponse)."""
    return {"error": {"message": message, "type": type, "param": param, "code": code}}


class ApiError(Exception):
    status_code = 500
    type = "server_error"

    def __init__(
        self,
        message: str,
        *,
        param: str | None = None,
        code: str | None = None,
        headers: dict[str, str] | None = None,
    ) -> None:
        super().__init__(message)
        self.message = message
        self.param = param
        self.code = code
        self.headers = headers or {}

    def envelope(self) -> dict:
        return error_envelope(self.message, self.type, param=self.param, code=self.code)


class InvalidRequest(ApiError):
    status_code = 400
    type = "invalid_request_error"


class MissingParameter(InvalidRequest):
    def __init__(self, name: str) -> None:
        super().__init__(f"Missing required parameter: '{name}'.", param=name, code="missing_required_parameter")


class Unauthorized(ApiError):
    status_code = 401
    type = "invalid_request_error"


class Forbidden(ApiError):
    status_code = 403
    type = "invalid_request_error"


class NotFound(ApiError):
    status_code = 404
    type = "invalid_request_error"


class Conflict(ApiError):
    status_code = 409
    type = "invalid_request_error"


class PayloadTooLarge(ApiError):
    status_code = 413
    type = "invalid_request_error"


class QuotaExceeded(ApiError):
    """A per-project limit: 429 as OpenAI answers quota and enqueued limits, but marked not to
    be retried (the official client would otherwise retry 429s at once, in vain)."""

    status_code = 429

    def __init__(self, message: str, *, type: str, code: str, param: str | None = None) -> None:
        super().__init__(message, param=param, code=code, headers={"x-should-retry": "false"})
        self.type = type


class ServiceUnavailable(ApiError):
    status_code = 503
    type = "server_error"

    def __init__(self, message: str, *, retry_after: int = 1) -> None:
        # x-should-retry tells the openai client to retry even where it would not by status.
        super().__init__(message, headers={"Retry-After": str(retry_after), "x-should-retry": "true"})


class InsufficientStorage(ApiError):
    """The blob store's disk is full: nothing was stored; the client may retry later."""

    status_code = 507
    type = "server_error"

    def __init__(
        self,
        message: str = "The server has no storage space left for this upload; nothing was stored. Please retry later.",
    ) -> None:
        super().__init__(message, code="insufficient_storage")


# errno values that mean "no space": a full filesystem or a quota.
DISK_FULL_ERRNOS = frozenset({errno.ENOSPC, errno.EDQUOT})


def is_disk_full(exc: BaseException) -> bool:
    return isinstance(exc, OSError) and exc.errno in DISK_FULL_ERRNOS
