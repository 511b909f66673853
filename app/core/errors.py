"""Typed API errors and OpenAI's error envelope, written once: the HTTP error handlers render
ApiErrors with it, the OpenAPI document declares it, and upstream lines without a JSON body get it."""

from __future__ import annotations

import errno
from collections.abc import Iterable, Sequence
from typing import Any

from pydantic import BaseModel

from app.core.line_errors import LineErrorCode


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
        super().__init__(
            f"Missing required parameter: '{name}'.", param=name, code=LineErrorCode.MISSING_REQUIRED_PARAMETER
        )


class InvalidValue(InvalidRequest):
    """A parameter outside its allowed values, in OpenAI's words: `Invalid value for 'purpose':
    'x'. Supported values are: 'batch', 'user_data'.`"""

    def __init__(self, param: str, value: object, supported: Iterable[str]) -> None:
        listed = ", ".join(f"'{v}'" for v in supported)
        message = f"Invalid value for '{param}': '{value}'. Supported values are: {listed}."
        super().__init__(message, param=param, code="invalid_value")


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


class MisdirectedRequest(ApiError):
    """421: the request names a host this server does not answer for (open mode: not loopback)."""

    status_code = 421
    type = "invalid_request_error"


class UnsupportedMediaType(ApiError):
    status_code = 415
    type = "invalid_request_error"


class TooManyRequests(ApiError):
    """429 with Retry-After: the client may try again once that many seconds have passed."""

    status_code = 429
    type = "requests"

    def __init__(self, message: str, *, retry_after: int, code: str = "rate_limit_exceeded") -> None:
        super().__init__(message, code=code, headers={"Retry-After": str(retry_after)})


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


# pydantic error type -> OpenAI error code for query/body parameters.
_VALIDATION_CODES = {
    "less_than_equal": "integer_above_max_value",
    "less_than": "integer_above_max_value",
    "greater_than_equal": "integer_below_min_value",
    "greater_than": "integer_below_min_value",
    "missing": LineErrorCode.MISSING_REQUIRED_PARAMETER,
    "int_parsing": "invalid_type",
    "int_type": "invalid_type",
    "string_type": "invalid_type",
    "dict_type": "invalid_type",
    "model_type": "invalid_type",
    "string_too_long": "string_above_max_length",
    "literal_error": "invalid_value",
    "enum": "invalid_value",
}

# The error type of a request model's own check (pydantic has none of this name): its message
# follows "Invalid '<param>': "; with a `supported` context, the value is not one of those.
INVALID_VALUE = "invalid_value"


def invalid_request_from(errors: Sequence[Any]) -> InvalidRequest:
    """The 400 for pydantic's validation errors (of a query, a body, or a request model that a
    service validates): the first error, worded as OpenAI words it."""
    first = errors[0]
    loc = [str(p) for p in first.get("loc", ()) if p not in ("query", "body", "path", "header")]
    of_key = loc[-1:] == ["[key]"]  # an object's key: pydantic's location is the object, the key, "[key]"
    if of_key:
        loc = loc[:-2]
    param = ".".join(loc) or None
    kind = first.get("type", "")
    code = _VALIDATION_CODES.get(kind, "invalid_value")
    value = first.get("input")
    context = first.get("ctx") or {}
    if "supported" in context:
        return InvalidValue(param or "", value, context["supported"])
    if kind == "missing":
        message = f"Missing required parameter: '{param}'."
    elif kind in ("less_than_equal", "less_than"):
        bound = context.get("le", context.get("lt"))
        message = (
            f"Invalid '{param}': integer above maximum value. Expected a value <= {bound}, but got {value} instead."
        )
    elif kind in ("greater_than_equal", "greater_than"):
        bound = context.get("ge", context.get("gt"))
        message = (
            f"Invalid '{param}': integer below minimum value. Expected a value >= {bound}, but got {value} instead."
        )
    elif kind == "literal_error":
        supported = ", ".join(str(context.get("expected", "")).rsplit(" or ", 1))
        message = f"Invalid value for '{param}': '{value}'. Supported values are: {supported}."
    elif kind == "string_type":
        message = f"Invalid type for '{param}': expected a string."
    elif kind in ("dict_type", "model_type"):
        message = f"Invalid type for '{param}': expected an object."
    elif kind == "too_long" and isinstance(value, dict):
        code = "object_above_max_properties"
        message = (
            f"Invalid '{param}': too many properties. Expected an object with at most {context.get('max_length')} "
            f"properties, but got {len(value)} instead."
        )
    elif kind == "string_too_long" and of_key:
        code = "invalid_value"
        message = (
            f"Invalid '{param}': key '{str(value)[:20]}...' is longer than {context.get('max_length')} characters."
        )
    elif kind == "string_too_long":
        message = (
            f"Invalid '{param}': string too long. Expected a string with maximum length {context.get('max_length')}, "
            f"but got a string with length {len(str(value))} instead."
        )
    elif kind == INVALID_VALUE:
        message = f"Invalid '{param}': {first.get('msg', 'invalid')}."
    else:
        message = f"Invalid value for '{param}': {first.get('msg', 'invalid')}."
    return InvalidRequest(message, param=param, code=code)
