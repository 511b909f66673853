"""ASGI middleware: who the caller is, decided from the headers alone, before any request body is
read (a FastAPI dependency runs only once the body is parsed: a keyless 300 MB body used to be
read whole before its 401). The one place a key is resolved: the caller is kept in the request's
state, where the routes' dependencies (app/api/deps.py) take it.

- `/v1/...`: a key (`Authorization: Bearer`, or Anthropic's `x-api-key` on `/v1/messages...`)
  or 401; a bad key is 429 instead while its address or its prefix has failed the check too
  often (a good key is always served).
- `/health`: the caller if its key is good (admins see details), else anonymous; never refused.
- In open mode every request but `/health...` must name a loopback host (421) and carry no
  foreign `Origin` (403); see app/domains/organization/open_mode.py."""

from __future__ import annotations

from starlette.requests import Request
from starlette.types import ASGIApp, Receive, Scope, Send

from app.api.runtime import runtime_if_started
from app.core.anthropic_api import is_anthropic_route
from app.core.errors import ApiError
from app.domains.organization.auth import Authenticator, Caller, authenticator_of
from app.domains.organization.open_mode import check_local_request
from app.http.body_limit import has_body, refuse

HEALTH_PATHS = frozenset({"/health", "/health/live"})


def needs_key(path: str) -> bool:
    return path == "/v1" or path.startswith("/v1/")


def _authorization(request: Request) -> str | None:
    key = request.headers.get("x-api-key") if is_anthropic_route(request.scope["path"]) else None
    return f"Bearer {key}" if key else request.headers.get("authorization")


def _address(request: Request) -> str:
    return request.client.host if request.client else ""


async def _caller(auth: Authenticator, request: Request) -> Caller:
    return await auth.caller_for(_authorization(request), _address(request))


async def _health_caller(auth: Authenticator, request: Request) -> Caller | None:
    """Who asks for /health, or None (anonymous: no key, a refused one, or open mode from afar)."""
    try:
        caller = await _caller(auth, request)
        if caller.open_mode:
            check_local_request(request.headers.get("host"), request.headers.get("origin"))
    except ApiError:
        return None
    return caller


class FrontDoorMiddleware:
    def __init__(self, app: ASGIApp) -> None:
        self.app = app

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        runtime = runtime_if_started(scope["app"]) if scope["type"] == "http" else None
        if runtime is None:  # not HTTP (the lifespan itself), or before the lifespan started
            await self.app(scope, receive, send)
            return
        request, path = Request(scope), scope["path"]
        auth = authenticator_of(scope["app"])
        try:
            if path in HEALTH_PATHS:
                request.state.caller = await _health_caller(auth, request)
            else:
                if await auth.is_open_mode():
                    check_local_request(request.headers.get("host"), request.headers.get("origin"))
                if needs_key(path):
                    request.state.caller = await _caller(auth, request)
        except Exception as refused:  # noqa: BLE001 - rendered as the routes' handlers render it
            await refuse(scope, receive, send, refused, close=has_body(dict(scope["headers"])))
            return
        await self.app(scope, receive, send)
