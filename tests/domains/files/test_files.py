"""Files API through the official openai client against a real server (SQLite and Postgres)."""

from __future__ import annotations

import asyncio
import os
import time

import openai
import pytest

from harness.poll import wait_until
from tests.support import db


def _jsonl(n: int = 3) -> bytes:
    return b"".join(b'{"custom_id": "r%d", "n": %d}\n' % (i, i) for i in range(n))


def test_upload_from_bytes_and_path_round_trips(client, tmp_path):
    payload = _jsonl(5)
    from_bytes = client.files.create(file=("in.jsonl", payload), purpose="batch")
    assert from_bytes.object == "file"
    assert from_bytes.filename == "in.jsonl"
    assert from_bytes.bytes == len(payload)
    assert from_bytes.purpose == "batch"
    assert from_bytes.status == "processed"
    assert from_bytes.id.startswith("file-")
    # Batch files expire after 30 days unless told otherwise, as on OpenAI.
    assert from_bytes.expires_at - from_bytes.created_at == 30 * 24 * 3600
    assert abs(from_bytes.created_at - time.time()) < 60

    path = tmp_path / "from-path.jsonl"
    path.write_bytes(payload)
    from_path = client.files.create(file=path, purpose="batch")
    assert from_path.filename == "from-path.jsonl"
    assert from_path.id != from_bytes.id

    for file in (from_bytes, from_path):
        assert client.files.content(file.id).content == payload
        assert client.files.retrieve(file.id).model_dump() == file.model_dump()


def test_raw_bytes_upload_is_named_upload(client):
    file = client.files.create(file=b"hello", purpose="user_data")
    assert file.filename == "upload"
    assert file.expires_at is None


def test_binary_content_is_byte_identical_and_streamed_raw(client, server):
    payload = os.urandom(3 * 1024 * 1024 + 17)
    file = client.files.create(file=("blob.bin", payload), purpose="user_data")
    content = client.files.content(file.id)
    assert content.content == payload
    assert content.response.headers["content-type"] == "application/octet-stream"
    assert 'filename="blob.bin"' in content.response.headers["content-disposition"]
    assert int(content.response.headers["content-length"]) == len(payload)
    with client.files.with_streaming_response.content(file.id) as streamed:
        assert b"".join(streamed.iter_bytes()) == payload


def test_strict_client_accepts_every_object(server):
    strict = server.client("key-a", _strict_response_validation=True)
    file = strict.files.create(file=("s.jsonl", _jsonl()), purpose="batch")
    assert strict.files.retrieve(file.id).id == file.id
    assert any(f.id == file.id for f in strict.files.list(purpose="batch", limit=5))
    deleted = strict.files.delete(file.id)
    assert (deleted.id, deleted.deleted, deleted.object) == (file.id, True, "file")


def test_list_auto_paginates_in_both_orders(server):
    lister = server.client("key-list")
    uploaded = [lister.files.create(file=(f"f{i}.jsonl", _jsonl(1)), purpose="batch").id for i in range(27)]
    other = lister.files.create(file=("x.txt", b"x"), purpose="user_data").id

    ascending = [f.id for f in lister.files.list(limit=10, order="asc", purpose="batch")]
    descending = [f.id for f in lister.files.list(limit=10, purpose="batch")]
    assert ascending == uploaded
    assert descending == uploaded[::-1]
    assert other not in ascending

    first = lister.files.list(limit=10, order="asc", purpose="batch")
    assert len(first.data) == 10 and first.has_more is True
    raw = server.http.get(
        f"{server.base_url}/files",
        params={"limit": 10, "order": "asc", "purpose": "batch", "after": uploaded[19]},
        headers={"Authorization": "Bearer key-list"},
    ).json()
    assert [f["id"] for f in raw["data"]] == uploaded[20:]
    assert raw["has_more"] is False
    assert raw["object"] == "list"
    assert (raw["first_id"], raw["last_id"]) == (uploaded[20], uploaded[26])

    # Deleting every file while iterating must neither stop early nor loop.
    seen = []
    for file in lister.files.list(limit=10, order="asc"):
        seen.append(file.id)
        lister.files.delete(file.id)
    assert seen == uploaded + [other]
    empty = lister.files.list()
    assert empty.data == [] and empty.has_more is False


def test_delete_removes_file_and_blob(client, server):
    file = client.files.create(file=("d.jsonl", _jsonl()), purpose="batch")
    blobs_before = db.blob_files(server)
    deleted = client.files.delete(file.id)
    assert (deleted.id, deleted.object, deleted.deleted) == (file.id, "file", True)
    assert len(db.blob_files(server)) == len(blobs_before) - 1
    for call in (client.files.retrieve, client.files.content, client.files.delete):
        with pytest.raises(openai.NotFoundError) as info:
            call(file.id)
        assert info.value.body["message"] == f"No such File object: {file.id}"
    assert file.id not in [f.id for f in client.files.list()]


def test_errors_use_openai_envelope_and_exception_classes(client, server):
    with pytest.raises(openai.NotFoundError) as info:
        client.files.retrieve("file-doesnotexist")
    assert info.value.status_code == 404
    assert info.value.body == {
        "message": "No such File object: file-doesnotexist",
        "type": "invalid_request_error",
        "param": "id",
        "code": None,
    }
    assert info.value.request_id.startswith("req_")

    with pytest.raises(openai.BadRequestError) as info:
        client.files.create(file=("notes.txt", b"hi"), purpose="batch")
    assert info.value.body["message"] == "Invalid file format for Batch API. Must be .jsonl"

    with pytest.raises(openai.BadRequestError) as info:
        client.files.create(file=("a.jsonl", b"{}"), purpose="weights")  # type: ignore[arg-type]
    assert info.value.param == "purpose" and info.value.code == "invalid_value"

    with pytest.raises(openai.BadRequestError) as info:
        client.files.create(
            file=("a.jsonl", b"{}"), purpose="batch", expires_after={"anchor": "created_at", "seconds": 60}
        )
    assert info.value.param == "expires_after.seconds"

    with pytest.raises(openai.BadRequestError) as info:
        client.files.list(limit=0)
    assert (info.value.param, info.value.code) == ("limit", "integer_below_min_value")
    with pytest.raises(openai.BadRequestError) as info:
        client.files.list(limit=10_001)
    assert info.value.code == "integer_above_max_value"
    assert "Expected a value <= 10000, but got 10001 instead." in info.value.body["message"]

    with pytest.raises(openai.BadRequestError) as info:
        client.files.list(order="sideways")  # type: ignore[arg-type]
    assert info.value.param == "order"

    missing_file = server.http.post(
        f"{server.base_url}/files",
        data={"purpose": "batch"},
        files={"other": ("x", b"1")},
        headers={"Authorization": "Bearer key-a"},
    )
    assert missing_file.status_code == 400
    assert missing_file.json()["error"]["code"] == "missing_required_parameter"
    assert missing_file.json()["error"]["param"] == "file"

    not_multipart = server.http.post(
        f"{server.base_url}/files", json={"purpose": "batch"}, headers={"Authorization": "Bearer key-a"}
    )
    assert not_multipart.status_code == 400

    unknown_route = server.http.get(f"{server.base_url}/nothing-here", headers={"Authorization": "Bearer key-a"})
    assert unknown_route.status_code == 404
    assert unknown_route.json()["error"]["message"] == "Invalid URL (GET /v1/nothing-here)"
    assert unknown_route.headers["x-request-id"].startswith("req_")


def test_bad_or_missing_key_is_401(server):
    wrong = server.client("sk-wrong-key-123456")
    with pytest.raises(openai.AuthenticationError) as info:
        wrong.files.list()
    assert info.value.status_code == 401
    assert info.value.code == "invalid_api_key"
    assert info.value.body["message"] == "Incorrect API key provided: sk-wro***3456."

    missing = server.http.get(f"{server.base_url}/files")
    assert missing.status_code == 401
    assert missing.json()["error"]["type"] == "invalid_request_error"
    assert missing.headers["x-request-id"].startswith("req_")


def test_projects_cannot_see_each_others_files(client, client_b):
    mine = client.files.create(file=("mine.jsonl", _jsonl()), purpose="batch")
    theirs = client_b.files.create(file=("theirs.jsonl", _jsonl()), purpose="batch")
    for call in (client_b.files.retrieve, client_b.files.content, client_b.files.delete):
        with pytest.raises(openai.NotFoundError):
            call(mine.id)
    assert mine.id not in [f.id for f in client_b.files.list()]
    assert theirs.id not in [f.id for f in client.files.list()]
    # The owner still has it, untouched.
    assert client.files.content(mine.id).content == _jsonl()


def test_every_response_has_a_request_id(client):
    file = client.files.create(file=("r.jsonl", _jsonl()), purpose="batch")
    assert file._request_id.startswith("req_")
    assert client.files.retrieve(file.id)._request_id.startswith("req_")
    assert client.files.with_raw_response.list().headers["x-request-id"].startswith("req_")


def test_expires_after_is_honoured_and_expired_files_are_swept(client, server):
    file = client.files.create(
        file=("e.jsonl", _jsonl()), purpose="batch", expires_after={"anchor": "created_at", "seconds": 3600}
    )
    assert file.expires_at == file.created_at + 3600
    keep = client.files.create(file=("k.txt", b"keep"), purpose="user_data")
    blobs_before = len(db.blob_files(server))

    # Move the expiry into the past instead of waiting an hour.
    db.execute(server, "UPDATE files SET expires_at = :t WHERE id = :id", t=int(time.time()) - 1, id=file.id)
    with pytest.raises(openai.NotFoundError):
        client.files.retrieve(file.id)
    assert file.id not in [f.id for f in client.files.list()]
    wait_until(lambda: len(db.blob_files(server)) == blobs_before - 1, 10, "the expired file's blob removed")
    assert db.execute(server, "SELECT deleted_at IS NOT NULL FROM files WHERE id = :id", id=file.id) == [(True,)]
    assert client.files.content(keep.id).content == b"keep"


def test_deleted_file_records_are_purged_after_the_grace_period(client, server):
    """The shared server keeps tombstones for a week; ageing one past that makes the sweep drop it,
    while a recent one stays (so a deleted id still works as a cursor)."""
    kept, old, recent = (
        client.files.create(file=(f"{n}.txt", b"x"), purpose="user_data") for n in ("kept", "old", "recent")
    )
    client.files.delete(old.id)
    client.files.delete(recent.id)
    db.execute(server, "UPDATE files SET deleted_at = :t WHERE id = :id", t=int(time.time()) - 8 * 24 * 3600, id=old.id)
    purged = "SELECT count(*) FROM files WHERE id = :id"
    wait_until(lambda: db.execute(server, purged, id=old.id) == [(0,)], 10, "the old tombstone purged")
    assert db.execute(server, "SELECT deleted_at IS NOT NULL FROM files WHERE id = :id", id=recent.id) == [(True,)]
    # The recent tombstone is still a cursor (the page after it starts at the file made before
    # the two); the purged one no longer is.
    assert [f.id for f in client.files.list(after=recent.id, limit=1).data] == [kept.id]
    with pytest.raises(openai.NotFoundError):
        client.files.list(after=old.id)


def test_async_client_round_trip(server):
    asyncio.run(_async_round_trip(server))


async def _async_round_trip(server):
    client = server.async_client("key-a")
    payload = _jsonl(4)
    file = await client.files.create(file=("async.jsonl", payload), purpose="batch")
    assert (await client.files.retrieve(file.id)).filename == "async.jsonl"
    assert (await client.files.content(file.id)).content == payload
    ids = [f.id async for f in client.files.list(limit=2, purpose="batch")]
    assert file.id in ids
    assert (await client.files.delete(file.id)).deleted is True
    with pytest.raises(openai.NotFoundError):
        await client.files.retrieve(file.id)
    await client.close()


def test_openapi_documents_real_shapes(server):
    schema = server.http.get(server.base_url.replace("/v1", "/openapi.json")).json()
    upload = schema["paths"]["/v1/files"]["post"]
    assert "multipart/form-data" in upload["requestBody"]["content"]
    assert "422" not in str(schema)
    assert upload["responses"]["400"]["content"]["application/json"]["schema"]["$ref"].endswith("ErrorResponse")
    assert server.http.get(server.base_url.replace("/v1", "/docs")).status_code == 200
