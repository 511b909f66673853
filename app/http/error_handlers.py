"""Render every error as OpenAI's envelope: {"error": {message, type, param, code}}, except on
Anthropic's routes (/v1/messages...), which answer in Anthropic's."""

from __future__ import annotations

import logging

from fastapi import FastAPI, Request
from fastapi.exceptions import RequestValidationError
from fastapi.responses import JSONResponse, Response
from sqlalchemy.exc import DBAPIError, OperationalError
from sqlalchemy.exc import TimeoutError as PoolTimeout
from starlette.exceptions import HTTPException as StarletteHTTPException
from starlette.routing import Match

from app.core.anthropic_api import anthropic_error, is_anthropic_route
from app.core.errors import (
    ApiError,
    InsufficientStorage,
    InvalidRequest,
    ServiceUnavailable,
    invalid_request_from,
    is_disk_full,
)
from app.db.outages import is_database_busy, is_database_unreachable

log = logging.getLogger("batchd.errors")


def _respond(request: Request, error: ApiError) -> JSONResponse:
    headers = dict(error.headers)
    request_id = getattr(request.state, "request_id", None)
    if request_id:
        headers["x-request-id"] = request_id
    if is_anthropic_route(request.url.path):
        envelope = anthropic_error(error.status_code, error.message, request_id)
        return JSONResponse(envelope, status_code=error.status_code, headers=headers)
    return JSONResponse(error.envelope(), status_code=error.status_code, headers=headers)


async def error_response(request: Request, exc: Exception) -> Response:
    """The response the app's handlers below give `exc`, for a middleware that answers before
    the request is routed (outside the exception middleware that would render it)."""
    handlers = request.app.exception_handlers
    for cls in type(exc).__mro__:
        if cls in handlers:
            return await handlers[cls](request, exc)
    raise exc


def _validation_error(exc: RequestValidationError) -> InvalidRequest:
    return invalid_request_from(exc.errors())


def _allowed_methods(request: Request) -> str:
    """Every method the path supports. Starlette's 405 lists only those of the first route
    matching the path (POST /v1/files, not also GET); RFC 9110 wants them all."""
    methods: set[str] = set()
    for route in request.app.router.routes:
        match, _ = route.matches({**request.scope, "method": "__none__"})
        if match != Match.NONE:
            methods |= getattr(route, "methods", None) or set()
    return ", ".join(sorted(methods))


def install_error_handlers(app: FastAPI) -> None:
    @app.exception_handler(ApiError)
    async def api_error(request: Request, exc: ApiError) -> JSONResponse:
        return _respond(request, exc)

    @app.exception_handler(RequestValidationError)
    async def validation_error(request: Request, exc: RequestValidationError) -> JSONResponse:
        return _respond(request, _validation_error(exc))

    @app.exception_handler(StarletteHTTPException)
    async def http_error(request: Request, exc: StarletteHTTPException) -> JSONResponse:
        if exc.status_code in (404, 405):
            error: ApiError = InvalidRequest(f"Invalid URL ({request.method} {request.url.path})")
            error.status_code = exc.status_code
            if exc.status_code == 405:
                error.headers = {"Allow": _allowed_methods(request)}
        else:
            error = ApiError(str(exc.detail))
            error.status_code = exc.status_code
            error.type = "invalid_request_error" if exc.status_code < 500 else "server_error"
        # what the exception carries (e.g. WWW-Authenticate), under ours
        error.headers = {**(exc.headers or {}), **error.headers}
        return _respond(request, error)

    @app.exception_handler(OperationalError)
    async def database_error(request: Request, exc: OperationalError) -> JSONResponse:
        if is_database_busy(exc):
            return _respond(request, ServiceUnavailable("The database is busy; please retry."))
        if is_database_unreachable(exc):
            return _respond(request, ServiceUnavailable("The database is unavailable; please retry.", retry_after=2))
        if "database or disk is full" in str(exc.orig).lower():  # SQLite on a full filesystem
            return _respond(
                request,
                InsufficientStorage("The server's database has no space left; nothing was stored. Please retry later."),
            )
        log.exception("database error", exc_info=exc)
        return _respond(request, ApiError("The server had an error while processing your request."))

    # Registered for these classes (not left to the catch-all `Exception` handler, which Starlette
    # runs and then re-raises as a logged traceback): expected outages, answered and retried.
    @app.exception_handler(OSError)
    @app.exception_handler(DBAPIError)
    async def outage(request: Request, exc: Exception) -> JSONResponse:
        if is_disk_full(exc):  # e.g. the fsync of a blob commit on a full disk
            return _respond(request, InsufficientStorage())
        if is_database_unreachable(exc):
            log.warning("database unreachable: %s", exc)
            return _respond(request, ServiceUnavailable("The database is unavailable; please retry.", retry_after=2))
        log.exception("unhandled error", exc_info=exc)
        return _respond(request, ApiError("The server had an error while processing your request."))

    @app.exception_handler(PoolTimeout)
    async def pool_timeout(request: Request, exc: PoolTimeout) -> JSONResponse:
        return _respond(request, ServiceUnavailable("The server is busy; please retry."))

    @app.exception_handler(Exception)
    async def unexpected(request: Request, exc: Exception) -> JSONResponse:
        log.exception("unhandled error", exc_info=exc)
        return _respond(request, ApiError("The server had an error while processing your request."))
