"""A webhook receiver for tests: a real HTTP server on a free port that records every delivery
and answers with scripted status codes (200 once the script runs out)."""

from __future__ import annotations

import threading
import time
from collections import deque
from dataclasses import dataclass
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

from harness.client import openai_client
from harness.poll import wait_until


@dataclass
class Delivery:
    headers: dict[str, str]
    body: bytes
    answered: int
    received_at: float  # time.monotonic() on arrival


class WebhookReceiver:
    def __init__(self, statuses: list[int] | None = None) -> None:
        self.statuses = deque(statuses or [])
        self.deliveries: list[Delivery] = []
        self._lock = threading.Lock()
        receiver = self

        class Handler(BaseHTTPRequestHandler):
            def do_POST(self) -> None:  # noqa: N802 - http.server's naming
                body = self.rfile.read(int(self.headers.get("content-length", 0)))
                with receiver._lock:
                    status = receiver.statuses.popleft() if receiver.statuses else 200
                    receiver.deliveries.append(
                        Delivery({k.lower(): v for k, v in self.headers.items()}, body, status, time.monotonic())
                    )
                self.send_response(status)
                self.send_header("content-length", "2")
                self.end_headers()
                self.wfile.write(b"ok")

            def log_message(self, *args) -> None:
                pass

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.thread = threading.Thread(target=self.server.serve_forever, daemon=True)

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.server.server_address[1]}/hook"

    def __enter__(self) -> WebhookReceiver:
        self.thread.start()
        return self

    def __exit__(self, *exc) -> None:
        self.server.shutdown()
        self.server.server_close()

    def wait_for(self, count: int, timeout: float = 60) -> list[Delivery]:
        wait_until(
            lambda: len(self.deliveries) >= count,
            timeout,
            lambda: f"{count} deliveries ({len(self.deliveries)} arrived)",
            interval=0.05,
        )
        return list(self.deliveries)

    def events(self, secret: str) -> list:
        """Every delivery, verified and parsed by the official client (raises on a bad signature)."""
        client = openai_client("http://127.0.0.1:1/v1", "unused")
        return [client.webhooks.unwrap(d.body, d.headers, secret=secret) for d in self.deliveries]
