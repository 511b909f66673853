"""ASGI middleware: every response carries `x-request-id` (the client exposes it as `_request_id`)."""

from __future__ import annotations

from starlette.types import Message, Receive, Scope, Send

from app.core.ids import new_request_id
from app.http.http_middleware import HttpMiddleware


class RequestIdMiddleware(HttpMiddleware):
    async def handle(self, scope: Scope, receive: Receive, send: Send) -> None:
        request_id = new_request_id()
        scope.setdefault("state", {})["request_id"] = request_id

        async def send_with_id(message: Message) -> None:
            if message["type"] == "http.response.start":
                headers = [(k, v) for k, v in message.get("headers", []) if k.lower() != b"x-request-id"]
                headers.append((b"x-request-id", request_id.encode()))
                message["headers"] = headers
            await send(message)

        await self.app(scope, receive, send_with_id)
