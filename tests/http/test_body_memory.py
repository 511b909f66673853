"""A real `batchd serve` (no models) sent 300 MB bodies it must not read: keyless multipart to
each kind of JSON route (401), multipart with a key to a JSON route (415), chunked JSON past the
cap (413). Each is answered within a second and the server's memory stays flat (it used to read
the whole body before its 401: +317 MB)."""

from __future__ import annotations

import time
from collections.abc import Iterator

import httpx
import pytest

from harness.rss import TreeRss

pytestmark = pytest.mark.parametrize("backend", ["sqlite", "postgres"], indirect=True)

MB = 1024 * 1024
BODY_BYTES = 300 * MB
CHUNK = b"\0" * MB
BOUNDARY = "front-door-boundary"
MULTIPART = f"multipart/form-data; boundary={BOUNDARY}"
KEYLESS_ROUTES = [
    "/v1/batches",
    "/v1/messages/batches",
    "/v1/webhook_endpoints",
    "/v1/organization/admin_api_keys",
]


def _body() -> Iterator[bytes]:
    """300 MB of a multipart file part, one reused 1 MB chunk at a time (the test holds 1 MB)."""
    head = f'--{BOUNDARY}\r\nContent-Disposition: form-data; name="file"; filename="a.jsonl"\r\n\r\n'.encode()
    yield head
    for _ in range((BODY_BYTES - len(head)) // MB):
        yield CHUNK


def _send(root: str, path: str, headers: dict[str, str], declared: bool = True) -> tuple[int, float]:
    if declared:
        headers = {**headers, "Content-Length": str(sum(map(len, _body())))}
    started = time.monotonic()
    with httpx.Client(timeout=30) as client:
        response = client.post(root + path, content=_body(), headers=headers)
    return response.status_code, time.monotonic() - started


def test_huge_bodies_are_refused_unread(start_server):
    server = start_server({"BATCHD_API_KEYS": "key-a=proj-a", "BATCHD_ADMIN_KEYS": "key-admin"})
    root = server.base_url.removesuffix("/v1")
    for _ in range(3):  # warm: the first requests' allocations are not a body's
        httpx.post(f"{root}/v1/batches", json={})
    cases = [(path, {"Content-Type": MULTIPART}, True, {401}) for path in KEYLESS_ROUTES]
    cases += [
        ("/v1/batches", {"Content-Type": MULTIPART}, False, {401}),  # chunked, no length to judge by
        ("/v1/batches", {"Content-Type": MULTIPART, "Authorization": "Bearer key-a"}, True, {415}),
        ("/v1/batches", {"Content-Type": "application/json", "Authorization": "Bearer key-a"}, False, {413}),
    ]
    with TreeRss(server.pid, interval=0.01) as rss:
        for path, headers, declared, expected in cases:
            status, seconds = _send(root, path, headers, declared)
            assert status in expected, (path, headers, status)
            assert seconds < 1.0, (path, headers, seconds)
    assert rss.growth < 20 * MB, f"server RSS grew {rss.growth / MB:.1f} MB"
