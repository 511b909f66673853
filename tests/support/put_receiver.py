"""A stand-in for presigned PUT URLs on 127.0.0.1 (a batch's `output_urls`): it records each
path's PUTs and keeps the bodies it accepted."""

from __future__ import annotations

import threading
from collections import defaultdict
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer


class PutReceiver:
    """Takes PUTs on 127.0.0.1: a path's first `fail_first[path]` PUTs (every one under
    /always-fail/) are answered 500, the others 200 and their body kept, by path."""

    def __init__(self) -> None:
        self.fail_first: dict[str, int] = {}
        self.attempts: defaultdict[str, int] = defaultdict(int)
        self.bodies: dict[str, bytes] = {}
        self.lengths: dict[str, str | None] = {}
        receiver = self

        class Handler(BaseHTTPRequestHandler):
            def do_PUT(self):  # noqa: N802 - http.server's naming
                length = self.headers.get("content-length")
                body = self.rfile.read(int(length or 0))
                path = self.path.split("?", 1)[0]
                receiver.attempts[path] += 1
                failing = path.startswith("/always-fail/") or receiver.attempts[path] <= receiver.fail_first.get(
                    path, 0
                )
                if not failing:
                    receiver.bodies[path] = body
                    receiver.lengths[path] = length
                self.send_response(500 if failing else 200)
                self.send_header("content-length", "0")
                self.end_headers()

            def log_message(self, *args) -> None:
                pass

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.thread = threading.Thread(target=self.server.serve_forever, daemon=True)
        self.thread.start()

    def url(self, path: str) -> str:
        return f"http://127.0.0.1:{self.server.server_address[1]}{path}?X-Amz-Signature=secret"

    def close(self) -> None:
        self.server.shutdown()
        self.server.server_close()
