"""HTTP request metrics, recorded by route template."""

from __future__ import annotations

import time

from starlette.types import Message, Receive, Scope, Send

from app.core.metrics import record_http_request
from app.http.http_middleware import HttpMiddleware


class HttpMetricsMiddleware(HttpMiddleware):
    """Counts requests and their latency by route template (`/v1/batches/{batch_id}`), never by
    raw path, so ids do not become label values; unknown paths share one label."""

    async def handle(self, scope: Scope, receive: Receive, send: Send) -> None:
        started = time.perf_counter()
        status = 500

        async def send_and_watch(message: Message) -> None:
            nonlocal status
            if message["type"] == "http.response.start":
                status = message["status"]
            await send(message)

        try:
            await self.app(scope, receive, send_and_watch)
        finally:
            route = getattr(scope.get("route"), "path", None)
            record_http_request(scope.get("method", "GET"), route, status, time.perf_counter() - started)
