"""Input hygiene by parsing, not spelling (issue #54): the NUL and lone-surrogate guard of
tests/http/test_input_hygiene.py holds on every body FastAPI parses as JSON, whatever the
Content-Type's case or `+json` type (it compared `application/json` case-sensitively: with
`Application/JSON` a NUL reached Postgres); a request with two Content-Type headers, which layers
read differently, is a 400; and a body nested too deep for the parser is a 400, never a 500
(RecursionError). In process, on SQLite and Postgres."""

from __future__ import annotations

import json

import pytest

from tests.support.batches import chat_line, create

KEY = "key-parsing"
BATCH = {"input_file_id": "file-abc", "endpoint": "/v1/chat/completions", "completion_window": "24h"}
NUL_METADATA = json.dumps({**BATCH, "metadata": {"k": "a\x00b"}}).encode()  # escaped: \u0000
JSON_TYPES = ["Application/JSON", "application/x+json", "APPLICATION/JSON; Charset=UTF-8", "application/vnd.a+JSON"]
DEPTH = 50_000


def _deep(inner: bytes = b"0") -> bytes:
    return b"[" * DEPTH + inner + b"]" * DEPTH


@pytest.fixture(scope="module")
def app(start_app):
    return start_app({"BATCHD_API_KEYS": f"{KEY}=proj-parsing"})


def _post(app, path: str, content: bytes, headers: dict | list, key: str = KEY):
    auth = [("authorization", f"Bearer {key}")]
    pairs = list(headers.items()) if isinstance(headers, dict) else headers
    return app.http.post(path, content=content, headers=auth + pairs)


def _refused(answer, param: str | None = None) -> None:
    assert answer.status_code == 400, answer.text
    error = answer.json()["error"]
    assert error["type"] == "invalid_request_error", answer.text
    if param is not None:
        assert error["param"] == param, answer.text


@pytest.mark.parametrize("content_type", JSON_TYPES)
def test_nul_in_metadata_is_400_whatever_the_json_content_type_spelling(app, content_type):
    _refused(_post(app, "/v1/batches", NUL_METADATA, {"content-type": content_type}), "metadata")
    # The same spelling of a clean body is parsed as JSON and reaches the service (no such file).
    clean = _post(app, "/v1/batches", json.dumps(BATCH).encode(), {"content-type": content_type})
    assert clean.status_code == 404 and clean.json()["error"]["param"] == "input_file_id", clean.text


@pytest.mark.parametrize(
    "types",
    [["application/json", "application/json"], ["text/plain", "application/json"], ["application/json", "text/plain"]],
)
def test_two_content_type_headers_are_400(app, types):
    pairs = [("content-type", t) for t in types]
    _refused(_post(app, "/v1/batches", NUL_METADATA, pairs))
    _refused(_post(app, "/v1/batches", json.dumps(BATCH).encode(), pairs))
    listed = app.http.get("/v1/batches", headers=[("authorization", f"Bearer {KEY}"), *pairs])
    _refused(listed)


def test_a_body_nested_too_deep_for_the_parser_is_400_not_500(app):
    json_type = {"content-type": "application/json"}
    _refused(_post(app, "/v1/batches", _deep(), json_type))
    _refused(_post(app, "/v1/batches", b'{"metadata":' + _deep(b'"\\u0000"') + b"}", json_type))
    # A route that takes no body: the guard still parses one that may hide a NUL.
    _refused(_post(app, "/v1/batches/batch_abc/cancel", _deep(b'"\\u0000"'), json_type), "body")
    # Anthropic's route parses its own body, and answers in its envelope.
    deep = app.http.post("/v1/messages/batches", content=_deep(), headers={"x-api-key": KEY, **json_type})
    assert deep.status_code == 400 and deep.json()["error"]["type"] == "invalid_request_error", deep.text


def test_an_idempotent_retry_of_a_deep_body_is_answered_not_a_500(app):
    """The key's fingerprint of a clean body too deep to parse hashes its bytes: the cancel and its
    repeat are answered (a cancel keeps no response: its repeat runs again), never a 500 nor a key
    left held. The batch may have failed validation already (no models here): then both are 409s."""
    client = app.client(KEY)
    batch = create(client, [chat_line("one")])
    headers = {"content-type": "application/json", "idempotency-key": "cancel-deep-1"}
    for _ in range(2):
        answer = _post(app, f"/v1/batches/{batch.id}/cancel", _deep(), headers)
        assert answer.status_code in (200, 409), answer.text
        if answer.status_code == 409:
            assert answer.json()["error"]["code"] != "idempotency_key_in_use", answer.text
