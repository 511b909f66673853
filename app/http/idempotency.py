"""ASGI middleware for `Idempotency-Key` on every POST (the rules: app/services/idempotency.py).
It runs inside the front door (the caller, so the project, is known) and the body limit, and
sees the request's bytes as they pass to the route: memory stays flat for a large upload. The
fingerprint hashes the method, path, query and body: a JSON body by its parsed value, a
multipart body without its boundary (random per request), so a retry of the same call matches
while a changed one does not."""

from __future__ import annotations

import hashlib
import json
import re

from starlette.types import ASGIApp, Message, Receive, Scope, Send

from app.api.runtime import runtime_if_started
from app.http.body_limit import has_body, is_json, refuse
from app.services.idempotency import HEADER, Held, IdempotentRequests, Kept, check_key, different_request

# Create responses are small objects; a larger one is passed on but not kept.
MAX_KEPT_BODY = 1024 * 1024
# JSON bodies up to this size are fingerprinted by their parsed value (key order and spacing
# aside), larger ones by their bytes.
MAX_PARSED_BODY = 1024 * 1024
BOUNDARY = re.compile(rb'boundary="?([^";]+)"?', re.IGNORECASE)
REPLAYED_HEADER = (b"idempotent-replayed", b"true")


class Fingerprint:
    """The request's identity, fed its body as the body passes."""

    def __init__(self, scope: Scope) -> None:
        content_type = dict(scope["headers"]).get(b"content-type", b"")
        media = content_type.split(b";", 1)[0].strip().lower()
        self.hash = hashlib.sha256()
        for part in (scope["method"].encode(), scope["path"].encode(), scope["query_string"], media):
            self.hash.update(len(part).to_bytes(8, "big") + part)
        found = BOUNDARY.search(content_type) if media == b"multipart/form-data" else None
        self.marker = b"--" + found.group(1) if found else None
        self.parsed: bytearray | None = bytearray() if is_json(content_type) else None
        self.carry = b""
        self.whole = False  # the whole body was seen

    def feed(self, chunk: bytes, more: bool) -> None:
        if self.parsed is not None and len(self.parsed) + len(chunk) <= MAX_PARSED_BODY:
            self.parsed += chunk
        elif self.parsed is not None:  # too large to parse: its bytes from here on
            self.hash.update(bytes(self.parsed))
            self.parsed = None
        if self.parsed is None:
            self._feed_bytes(chunk, more)
        self.whole = not more

    def _feed_bytes(self, chunk: bytes, more: bool) -> None:
        if self.marker is None:
            self.hash.update(chunk)
            return
        data = self.carry + chunk
        # Keep back a tail that may be the start of a boundary the next chunk completes.
        cut = max(0, len(data) - len(self.marker) + 1) if more else len(data)
        straddling = data.find(self.marker, max(0, cut - len(self.marker) + 1))
        if 0 <= straddling < cut:
            cut = straddling
        self.hash.update(data[:cut].replace(self.marker, b"--boundary"))
        self.carry = data[cut:]

    def digest(self) -> str:
        if self.parsed is not None:
            try:
                value = json.loads(self.parsed)
            except ValueError:
                self.hash.update(bytes(self.parsed))
            else:
                self.hash.update(json.dumps(value, sort_keys=True, separators=(",", ":")).encode())
            self.parsed = None
        return self.hash.hexdigest()


class IdempotencyMiddleware:
    def __init__(self, app: ASGIApp, keep_seconds: float) -> None:
        self.app = app
        self.keep_seconds = keep_seconds

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        key = _key(scope)
        runtime = runtime_if_started(scope["app"]) if key is not None else None
        caller = scope.get("state", {}).get("caller")
        if key is None or runtime is None or caller is None:
            await self.app(scope, receive, send)
            return
        requests = IdempotentRequests(runtime.db, self.keep_seconds)
        try:
            found = await requests.hold_or_find(caller.project, check_key(key))
        except Exception as refused:  # noqa: BLE001 - rendered as the routes' handlers render it
            await refuse(scope, receive, send, refused, close=has_body(dict(scope["headers"])))
            return
        if isinstance(found, Held):
            await self._run(requests, found, scope, receive, send)
        else:
            await self._replay(found, key, scope, receive, send)

    async def _run(self, requests: IdempotentRequests, held: Held, scope: Scope, receive: Receive, send: Send) -> None:
        fingerprint = Fingerprint(scope)
        response = _Kept()

        async def seen_receive() -> Message:
            message = await receive()
            if message["type"] == "http.request":
                fingerprint.feed(message.get("body", b""), message.get("more_body", False))
            return message

        async def kept_send(message: Message) -> None:
            response.see(message)
            await send(message)

        try:
            async with requests.renewing(held):
                await self.app(scope, seen_receive, kept_send)
        except BaseException:
            await requests.release(held)
            raise
        if response.worth_keeping() and fingerprint.whole:
            await requests.complete(held, fingerprint.digest(), response.status, response.content_type, response.body())
        else:
            await requests.release(held)

    async def _replay(self, kept: Kept, key: str, scope: Scope, receive: Receive, send: Send) -> None:
        fingerprint = Fingerprint(scope)
        while not fingerprint.whole:  # this request's body, only to compare
            message = await receive()
            if message["type"] != "http.request":
                return  # the client left
            fingerprint.feed(message.get("body", b""), message.get("more_body", False))
        if fingerprint.digest() != kept.fingerprint:
            await refuse(scope, receive, send, different_request(key), close=False)
            return
        headers = [
            (b"content-type", kept.content_type.encode()),
            (b"content-length", str(len(kept.body)).encode()),
            REPLAYED_HEADER,
        ]
        await send({"type": "http.response.start", "status": kept.status_code, "headers": headers})
        await send({"type": "http.response.body", "body": kept.body})


class _Kept:
    """The response as it passes: its status, type and body (up to MAX_KEPT_BODY)."""

    def __init__(self) -> None:
        self.status = 0
        self.content_type = ""
        self.chunks: list[bytes] = []
        self.size = 0

    def see(self, message: Message) -> None:
        if message["type"] == "http.response.start":
            self.status = message["status"]
            self.content_type = dict(message.get("headers", [])).get(b"content-type", b"").decode("latin-1")
        elif message["type"] == "http.response.body":
            body = message.get("body", b"")
            self.size += len(body)
            if self.size <= MAX_KEPT_BODY:
                self.chunks.append(body)

    def worth_keeping(self) -> bool:
        return 200 <= self.status < 300 and self.size <= MAX_KEPT_BODY

    def body(self) -> bytes:
        return b"".join(self.chunks)


def _key(scope: Scope) -> str | None:
    if scope["type"] != "http" or scope["method"] != "POST":
        return None
    for name, value in scope["headers"]:
        if name == HEADER.encode():
            return value.decode("latin-1")
    return None
