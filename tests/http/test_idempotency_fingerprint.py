"""The fingerprint of a request (app/http/idempotency.py): the same call matches whatever its
multipart boundary, JSON spacing and key order, or the chunks its body arrives in; any other
content, path or query does not."""

from __future__ import annotations

import pytest

from app.http.idempotency import Fingerprint


def _scope(content_type: bytes, path: str = "/v1/files", query: bytes = b"") -> dict:
    return {"method": "POST", "path": path, "query_string": query, "headers": [(b"content-type", content_type)]}


def _multipart(boundary: bytes, content: bytes) -> bytes:
    return (
        b"--" + boundary + b'\r\nContent-Disposition: form-data; name="purpose"\r\n\r\nbatch\r\n'
        b"--"
        + boundary
        + b'\r\nContent-Disposition: form-data; name="file"; filename="a.jsonl"\r\n\r\n'
        + content
        + b"\r\n--"
        + boundary
        + b"--\r\n"
    )


def _digest(scope: dict, body: bytes, chunk: int) -> str:
    fingerprint = Fingerprint(scope)
    pieces = [body[i : i + chunk] for i in range(0, len(body), chunk)] or [b""]
    for n, piece in enumerate(pieces):
        fingerprint.feed(piece, more=n < len(pieces) - 1)
    assert fingerprint.whole
    return fingerprint.digest()


def _multipart_digest(boundary: bytes, content: bytes, chunk: int) -> str:
    return _digest(_scope(b"multipart/form-data; boundary=" + boundary), _multipart(boundary, content), chunk)


@pytest.mark.parametrize("chunk", [1, 2, 3, 7, 16, 17, 64, 10_000])
def test_a_multipart_body_is_the_same_request_whatever_its_boundary_and_chunks(chunk):
    content = b'{"custom_id": "a"}\n' * 5
    expected = _multipart_digest(b"aaaa1111bbbb2222", content, 10_000)
    assert _multipart_digest(b"9f8e7d6c5b4a39281706f5e4d3c2b1a0", content, chunk) == expected
    assert _multipart_digest(b"9f8e7d6c5b4a39281706f5e4d3c2b1a0", content + b"x", chunk) != expected


def test_a_json_body_is_compared_by_value():
    scope = _scope(b"application/json")
    one = _digest(scope, b'{"a": 1, "b": [1, 2]}', 5)
    assert _digest(scope, b'{ "b":[1,2],\n "a":1 }', 3) == one
    assert _digest(scope, b'{"a": 1, "b": [2, 1]}', 5) != one
    assert _digest(_scope(b"application/json", path="/v1/batches"), b'{"a": 1, "b": [1, 2]}', 5) != one
    assert _digest(_scope(b"application/json", query=b"x=1"), b'{"a": 1, "b": [1, 2]}', 5) != one


def test_a_body_that_is_not_json_is_compared_by_its_bytes():
    scope = _scope(b"application/json")
    assert _digest(scope, b"{not json", 2) == _digest(scope, b"{not json", 4) != _digest(scope, b"{not json!", 4)


def test_a_json_body_too_large_to_parse_is_compared_by_its_bytes():
    scope = _scope(b"application/json")
    body = b'{"input": "' + b"x" * (2 * 1024 * 1024) + b'"}'
    assert _digest(scope, body, 65536) == _digest(scope, body, 100_000)
    assert _digest(scope, body, 65536) != _digest(scope, body.replace(b"xx", b"xy", 1), 65536)
