"""ASGI middleware: what request bodies may be. Multipart only where files are uploaded
(`POST /v1/files`, `POST /v1/uploads/{id}/parts`, which stream it with their own limits in the
files and uploads services); JSON everywhere else, any other Content-Type a 415 before anything
is read, and capped at BATCHD_MAX_JSON_BODY_BYTES: a declared Content-Length over the cap is
refused before anything is read, a chunked body is counted as it arrives. It runs after the front
door (app/http/front_door.py), so only a caller with a key gets this far with a body. What is
JSON is parsed from the Content-Type (app/core/media_types.py), and a request has one: two
Content-Type headers are a 400."""

from __future__ import annotations

from starlette.exceptions import HTTPException
from starlette.requests import Request
from starlette.types import ASGIApp, Message, Receive, Scope, Send

from app.core.errors import ApiError, InvalidRequest, PayloadTooLarge, UnsupportedMediaType
from app.core.media_types import is_json, takes_multipart
from app.http.error_handlers import error_response

# The one method whose bodies batchd's routes read; another method's body is never read (its
# route, if any, answers as it would without one: a 405 stays a 405).
BODY_METHODS = frozenset({"POST"})


def has_body(headers: dict[bytes, bytes]) -> bool:
    length = headers.get(b"content-length", b"")
    return b"transfer-encoding" in headers or (length.isdigit() and int(length) > 0)


def content_types(scope: Scope) -> list[bytes]:
    """Every Content-Type header's value (more than one is refused: which one a layer reads
    would differ, FastAPI's the first, a dict of the headers the last)."""
    return [value for name, value in scope.get("headers") or [] if name == b"content-type"]


def _too_large(limit: int) -> str:
    return f"Request body too large: the maximum for a JSON request body is {limit} bytes."


async def refuse(scope: Scope, receive: Receive, send: Send, error: Exception, *, close: bool = True) -> None:
    """Answer `error` as the routes' handlers would, without reading the body; `close`: close the
    connection after (a body was sent, and an unread body cannot be skipped cheaply)."""
    response = await error_response(Request(scope), error)
    if close:
        response.headers["Connection"] = "close"
    await response(scope, receive, send)


class BodyLimitMiddleware:
    """`larger` raises the cap for the POSTs of given paths (a Message Batch's request list)."""

    def __init__(self, app: ASGIApp, max_bytes: int, larger: dict[str, int] | None = None) -> None:
        self.app = app
        self.max_bytes = max_bytes
        self.larger = larger or {}

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        headers = dict(scope.get("headers") or []) if scope["type"] == "http" else {}
        if headers and len(content_types(scope)) > 1:
            refused = InvalidRequest("A request may have one Content-Type header; this one has several.")
            await refuse(scope, receive, send, refused, close=has_body(headers))
            return
        if not has_body(headers) or takes_multipart(scope["method"], scope["path"]):
            await self.app(scope, receive, send)
            return
        content_type = headers.get(b"content-type", b"")
        if scope["method"] in BODY_METHODS and not is_json(content_type.decode("latin-1")):
            given = content_type.decode("latin-1") or "none"
            error: ApiError = UnsupportedMediaType(
                f"Unsupported Content-Type '{given}': this route takes a JSON body "
                "(Content-Type: application/json); multipart bodies only upload files "
                "(POST /v1/files, POST /v1/uploads/{upload_id}/parts).",
                code="unsupported_media_type",
            )
            await refuse(scope, receive, send, error)
            return
        max_bytes = self.max_bytes
        if scope["method"] == "POST":
            max_bytes = self.larger.get(scope["path"].rstrip("/"), max_bytes)
        length = headers.get(b"content-length", b"")
        if length.isdigit() and int(length) > max_bytes:
            await refuse(scope, receive, send, PayloadTooLarge(_too_large(max_bytes), code="request_too_large"))
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

        async def send_closing_if_over(message: Message) -> None:
            # The rest of a body over the cap is not drained either: the connection closes.
            if message["type"] == "http.response.start" and received > max_bytes:
                message["headers"] = [*message.get("headers", []), (b"connection", b"close")]
            await send(message)

        await self.app(scope, counted_receive, send_closing_if_over)
