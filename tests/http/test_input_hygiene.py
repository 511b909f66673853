"""A NUL or a lone surrogate in any id, cursor, filename or metadata is a 400 naming the
parameter, on SQLite and Postgres alike (Postgres refuses NUL in every text column: before the
check these were 500s there and 404s on SQLite, and metadata stored NUL). Also `metadata[]=x`,
an empty metadata key /openapi.json forbids, is a 400. In process, one app per database."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from harness import postgres
from tests.support.app_server import AppServer

KEY, ADMIN = "key-hygiene", "admin-hygiene"
BATCH = {"input_file_id": "file-abc", "endpoint": "/v1/chat/completions", "completion_window": "24h"}
# (method, path, JSON body, the parameter the 400 names)
REFUSED = [
    ("GET", "/v1/files?after=file-%00", None, "after"),
    ("GET", "/v1/batches?after=batch_%00", None, "after"),
    ("GET", "/v1/files/file-%00abc", None, "file_id"),
    ("GET", "/v1/files/file-%00abc/content", None, "file_id"),
    ("DELETE", "/v1/files/file-%00abc", None, "file_id"),
    ("GET", "/v1/batches/batch_%00", None, "batch_id"),
    ("POST", "/v1/batches/batch_%00/cancel", None, "batch_id"),
    ("POST", "/v1/uploads/upload_%00/cancel", None, "upload_id"),
    ("GET", "/v1/webhook_endpoints/we_%00", None, "endpoint_id"),
    ("GET", "/v1/webhook_endpoints?after=we_%00", None, "after"),
    ("GET", "/v1/queue/requests?after=resp_%00", None, "after"),
    ("GET", "/v1/organization/projects/proj_%00", None, "project_id"),
    ("GET", "/v1/organization/admin_api_keys?after=key_%00", None, "after"),
    ("GET", "/v1/batches?metadata[k%00]=v", None, "metadata"),
    ("GET", "/v1/batches?metadata[k]=v%00", None, "metadata"),
    ("GET", "/v1/batches?metadata[]=x", None, "metadata"),
    ("POST", "/v1/batches", {**BATCH, "input_file_id": "file-\x00"}, "input_file_id"),
    ("POST", "/v1/batches", {**BATCH, "input_file_id": "file-\ud800"}, "input_file_id"),
    ("POST", "/v1/batches", {**BATCH, "metadata": {"k\x00": "v"}}, "metadata"),
    ("POST", "/v1/batches", {**BATCH, "metadata": {"k": "v\x00"}}, "metadata"),
    ("POST", "/v1/batches", {**BATCH, "metadata": {"k": "\udfff"}}, "metadata"),
    ("POST", "/v1/uploads", {"filename": "a\x00.jsonl", "purpose": "batch", "bytes": 2, "mime_type": "text/jsonl"}, "filename"),
]  # fmt: skip
MULTIPART_NUL_FILENAME = (
    b'--B\r\nContent-Disposition: form-data; name="purpose"\r\n\r\nbatch\r\n'
    b'--B\r\nContent-Disposition: form-data; name="file"; filename="in\x00put.jsonl"\r\n'
    b"Content-Type: application/octet-stream\r\n\r\n{}\n\r\n--B--\r\n"
)


def _refusals(app: AppServer) -> list[tuple[str, str, int, str | None]]:
    seen = []
    for method, path, body, _ in REFUSED:
        key = ADMIN if "/organization/" in path else KEY
        # Escaped as JSON allows (\u0000, \ud800): a lone surrogate has no UTF-8 of its own.
        content = None if body is None else json.dumps(body).encode()
        headers = {**app.as_key(key), "content-type": "application/json"}
        answer = app.http.request(method, path, content=content, headers=headers)
        error = answer.json().get("error", {}) if answer.headers["content-type"] == "application/json" else {}
        assert error.get("type") == "invalid_request_error" or answer.status_code != 400, answer.text
        seen.append((method, path, answer.status_code, error.get("param")))
    return seen


def _check(data_dir: Path, database_url: str | None) -> None:
    env = {"BATCHD_API_KEYS": f"{KEY}=proj-h", "BATCHD_ADMIN_KEYS": ADMIN}
    with AppServer(data_dir, database_url, env) as app:
        assert _refusals(app) == [(method, path, 400, param) for method, path, _, param in REFUSED]

        upload = app.http.post(
            "/v1/files",
            content=MULTIPART_NUL_FILENAME,
            headers={**app.as_key(KEY), "content-type": "multipart/form-data; boundary=B"},
        )
        assert (upload.status_code, upload.json()["error"]["param"]) == (400, "file")

        # Anthropic's routes answer in Anthropic's envelope.
        for path in ("/v1/messages/batches/msgbatch_%00", "/v1/messages/batches?after_id=msgbatch_%00"):
            answer = app.http.get(path, headers={"x-api-key": KEY})
            assert answer.status_code == 400 and answer.json()["error"]["type"] == "invalid_request_error"

        # Clean text passes: a pair of surrogates is one character, and the filters still work.
        clean = app.http.get("/v1/batches?metadata[k]=v", headers=app.as_key(KEY))
        assert clean.status_code == 200, clean.text
        paired = app.http.post("/v1/batches", json={**BATCH, "metadata": {"k": "\U0001f600"}}, headers=app.as_key(KEY))
        assert paired.status_code == 404 and paired.json()["error"]["param"] == "input_file_id"


@pytest.mark.parametrize("database", ["sqlite", "postgres"])
def test_nul_and_lone_surrogates_are_400s(tmp_path, database):
    if database == "sqlite":
        _check(tmp_path, None)
        return
    url = postgres.create_database()
    try:
        _check(tmp_path, url)
    finally:
        postgres.drop_database(url)
