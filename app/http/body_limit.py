"""ASGI middleware: request bodies other than multipart uploads (JSON: batch create, and any
body a client sends) are capped at BATCHD_MAX_JSON_BODY_BYTES. A declared Content-Length over
the cap is refused before anything is read; a chunked body is counted as it arrives. Uploads
(multipart) have their own streaming limits in the files service."""

from __future__ import annotations

from starlette.exceptions import HTTPException
from starlette.types import ASGIApp, Message, Receive, Scope, Send

from app.core.anthropic_api import anthropic_error, is_anthropic_route
from app.core.errors import PayloadTooLarge


def _too_large(limit: int) -> str:
    return f"Request body too large: the maximum for a JSON request body is {limit} bytes."


class BodyLimitMiddleware:
    """`larger` raises the cap for the POSTs of given paths (a Message Batch's request list)."""

    def __init__(self, app: ASGIApp, max_bytes: int, larger: dict[str, int] | None = None) -> None:
        self.app = app
        self.max_bytes = max_bytes
        self.larger = larger or {}

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        headers = dict(scope.get("headers") or [])
        if headers.get(b"content-type", b"").lower().startswith(b"multipart/form-data"):
            await self.app(scope, receive, send)
            return
        max_bytes = self.max_bytes
        if scope.get("method") == "POST":
            max_bytes = self.larger.get(scope.get("path", "").rstrip("/"), max_bytes)
        length = headers.get(b"content-length", b"")
        if length.isdigit() and int(length) > max_bytes:
            await self._refuse(scope, receive, send, max_bytes)
            return
        received = 0

        async def counted_receive() -> Message:
            nonlocal received
            message = await receive()
            if message["type"] == "http.request":
                received += len(message.get("body", b""))
                if received > max_bytes:
                    # Raised inside body parsing: FastAPI re-raises HTTPExceptions unchanged,
                    # and the handler renders it in the route's error envelope.
                    raise HTTPException(413, _too_large(max_bytes))
            return message

        await self.app(scope, counted_receive, send)

    async def _refuse(self, scope: Scope, receive: Receive, send: Send, max_bytes: int) -> None:
        from fastapi.responses import JSONResponse

        error = PayloadTooLarge(_too_large(max_bytes), code="request_too_large")
        envelope = (
            anthropic_error(413, error.message) if is_anthropic_route(scope.get("path", "")) else error.envelope()
        )
        # Connection: close, since the unread body cannot be skipped cheaply.
        response = JSONResponse(envelope, status_code=413, headers={"Connection": "close"})
        await response(scope, receive, send)
