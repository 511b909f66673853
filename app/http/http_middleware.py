"""The base of batchd's plain ASGI middlewares that act on HTTP requests only."""

from __future__ import annotations

from starlette.types import ASGIApp, Receive, Scope, Send


class HttpMiddleware:
    """Passes lifespan (and any other non-HTTP) events straight through and hands each HTTP
    request to `handle`. Plain ASGI, not starlette's BaseHTTPMiddleware, which buffers
    streaming responses through a task per request."""

    def __init__(self, app: ASGIApp) -> None:
        self.app = app

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        await self.handle(scope, receive, send)

    async def handle(self, scope: Scope, receive: Receive, send: Send) -> None:
        raise NotImplementedError
