"""ASGI middleware for `Idempotency-Key` on every POST (the rules: app/http/idempotency_store.py).
It runs inside the front door (the caller, so the API key a record belongs to, is known) and the
body limit, and sees the request's bytes as they pass to the route: memory stays flat for a large
upload. The fingerprint hashes the method, path, query and body: a JSON body by its parsed value,
a multipart body without its boundary (random per request), so a retry of the same call matches
while a changed one does not. A repeat is answered with the kept body, or by a GET of the made
object's retrieve path sent through the app as the same caller (its route's checks run again)."""

from __future__ import annotations

import hashlib
import json
import re
from urllib.parse import parse_qs, quote, urlencode

from starlette.types import ASGIApp, Message, Receive, Scope, Send

from app.api.deps import HELD_KEY_STATE
from app.api.runtime import runtime_if_started
from app.core.media_types import is_json
from app.http.body_limit import has_body, refuse
from app.http.idempotency_store import (
    HEADER,
    Create,
    Held,
    IdempotentRequests,
    Kept,
    NotBound,
    RecordId,
    check_key,
    create_of,
    different_request,
    nothing_kept,
)

# A response is seen up to this size (the service keeps less: MAX_KEPT_BODY); larger, it is
# passed on but neither kept nor read for the id of what it made.
MAX_SEEN_BODY = 1024 * 1024
# JSON bodies up to this size are fingerprinted by their parsed value (key order and spacing
# aside), larger ones by their bytes.
MAX_PARSED_BODY = 1024 * 1024
BOUNDARY = re.compile(rb'boundary="?([^";]+)"?', re.IGNORECASE)
REPLAYED_HEADER = (b"idempotent-replayed", b"true")
# A repeat answered by a GET sends that GET none of the POST's body headers, nor its key.
NOT_FOR_A_GET = {b"content-type", b"content-length", b"transfer-encoding", HEADER.encode()}


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
        self.parsed: bytearray | None = bytearray() if is_json(content_type.decode("latin-1")) else None
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
                canonical = json.dumps(json.loads(self.parsed), sort_keys=True, separators=(",", ":")).encode()
            except (ValueError, RecursionError):  # not JSON, or nested too deep to parse: its bytes
                canonical = bytes(self.parsed)
            self.hash.update(canonical)
            self.parsed = None
        return self.hash.hexdigest()


class IdempotencyMiddleware:
    def __init__(self, app: ASGIApp) -> None:
        self.app = app

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        key = _key(scope)
        runtime = runtime_if_started(scope["app"]) if key is not None else None
        caller = scope.get("state", {}).get("caller")
        if key is None or runtime is None or caller is None:
            await self.app(scope, receive, send)
            return
        requests = IdempotentRequests(runtime.db, runtime.settings)
        try:
            # The API key's own record: another key sending this key runs as a new request.
            record = RecordId(caller.project, caller.key_id or "", check_key(key))
            found = await requests.hold_or_find(record, caller.is_admin)
        except Exception as refused:  # noqa: BLE001 - rendered as the routes' handlers render it
            await refuse(scope, receive, send, refused, close=has_body(dict(scope["headers"])))
            return
        if isinstance(found, NotBound):
            await self.app(scope, receive, send)
        elif isinstance(found, Held):
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

        scope["state"][HELD_KEY_STATE] = held  # for the route's transaction (app/api/deps.py)
        try:
            async with requests.renewing(held):
                await self.app(scope, seen_receive, kept_send)
                create = create_of(_route_path(scope), held)
                if held.committed and create is not None and response.succeeded():
                    while not fingerprint.whole and (await seen_receive())["type"] == "http.request":
                        pass  # the rest of a body the route left unread: the fingerprint needs it
        except BaseException:
            await requests.release(held)
            raise
        if held.committed and create is not None and response.succeeded() and fingerprint.whole:
            body = None if create.secret else response.body()
            retrieve = _retrieve_path(create, scope, response.body())
            await requests.finish(held, fingerprint.digest(), response.status, response.content_type, body, retrieve)
        else:
            await requests.release(held)

    async def _replay(self, kept: Kept, key: str, scope: Scope, receive: Receive, send: Send) -> None:
        fingerprint = Fingerprint(scope)
        while not fingerprint.whole:  # this request's body, only to compare
            message = await receive()
            if message["type"] != "http.request":
                return  # the client left
            fingerprint.feed(message.get("body", b""), message.get("more_body", False))
        if kept.fingerprint and fingerprint.digest() != kept.fingerprint:
            await refuse(scope, receive, send, different_request(key), close=False)
        elif kept.body is not None:
            headers = [
                (b"content-type", kept.content_type.encode()),
                (b"content-length", str(len(kept.body)).encode()),
                REPLAYED_HEADER,
            ]
            await send({"type": "http.response.start", "status": kept.status_code, "headers": headers})
            await send({"type": "http.response.body", "body": kept.body})
        elif kept.retrieve_path is not None:
            await self._retrieve(kept.retrieve_path, scope, receive, send)
        else:
            await refuse(scope, receive, send, nothing_kept(key), close=False)

    async def _retrieve(self, target: str, scope: Scope, receive: Receive, send: Send) -> None:
        """Answer with a GET of what the first request made, as the same caller (its route's
        authorization runs again): the object as it is now, with no secret in it."""
        path, _, query = target.partition("?")
        headers = [(name, value) for name, value in scope["headers"] if name not in NOT_FOR_A_GET]
        get = {**scope, "method": "GET", "path": path, "raw_path": path.encode(), "query_string": query.encode()}
        get["headers"] = headers
        asked = False

        async def no_body() -> Message:
            nonlocal asked
            if not asked:
                asked = True
                return {"type": "http.request", "body": b"", "more_body": False}
            return await receive()

        async def replayed(message: Message) -> None:
            if message["type"] == "http.response.start":
                message = {**message, "headers": [*message.get("headers", []), REPLAYED_HEADER]}
            await send(message)

        await self.app(get, no_body, replayed)


def _route_path(scope: Scope) -> str | None:
    return getattr(scope.get("route"), "path", None)


def _retrieve_path(create: Create, scope: Scope, body: bytes) -> str | None:
    """The GET that shows what the create made: its template filled with the route's path
    parameters and the made object's `id` (and the `project` an admin key named)."""
    if create.retrieve is None:
        return None
    try:
        made = json.loads(body).get("id")
    except (ValueError, AttributeError):
        return None
    if not isinstance(made, str):
        return None
    params = {name: quote(str(value), safe="") for name, value in scope.get("path_params", {}).items()}
    path = create.retrieve.format(**params, id=quote(made, safe=""))
    project = parse_qs(scope["query_string"].decode("latin-1")).get("project")
    return f"{path}?{urlencode({'project': project[0]})}" if project else path


class _Kept:
    """The response as it passes: its status, type and body (up to MAX_SEEN_BODY)."""

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
            if self.size <= MAX_SEEN_BODY:
                self.chunks.append(body)

    def succeeded(self) -> bool:
        """A 2xx whose whole body was seen."""
        return 200 <= self.status < 300 and self.size <= MAX_SEEN_BODY

    def body(self) -> bytes:
        return b"".join(self.chunks)


def _key(scope: Scope) -> str | None:
    if scope["type"] != "http" or scope["method"] != "POST":
        return None
    for name, value in scope["headers"]:
        if name == HEADER.encode():
            return value.decode("latin-1")
    return None
