"""Uploads API (`client.uploads.*`) through the official openai client against a real server
(SQLite and Postgres): chunked uploads, md5 and byte-count checks, cancel, expiry."""

from __future__ import annotations

import hashlib
import os
import time

import openai
import pytest

from harness.poll import wait_until
from tests.support import db


def _part_rows(server, upload_id: str) -> list[tuple]:
    return db.execute(server, "SELECT id FROM upload_parts WHERE upload_id = :u", u=upload_id)


def _status(server, upload_id: str) -> str:
    return db.execute(server, "SELECT status FROM uploads WHERE id = :u", u=upload_id)[0][0]


def test_chunked_upload_from_path_round_trips_and_removes_parts(client, server, tmp_path):
    payload = b"".join(b'{"custom_id": "r%d", "pad": "%s"}\n' % (i, os.urandom(20).hex().encode()) for i in range(2000))
    path = tmp_path / "big-input.jsonl"
    path.write_bytes(payload)
    blobs_before = len(db.blob_files(server))

    upload = client.uploads.upload_file_chunked(
        file=path,
        mime_type="text/jsonl",
        purpose="batch",
        part_size=len(payload) // 3 + 1,
        md5=hashlib.md5(payload).hexdigest(),
    )

    assert upload.object == "upload" and upload.id.startswith("upload_")
    assert upload.status == "completed"
    assert upload.bytes == len(payload) and upload.filename == "big-input.jsonl" and upload.purpose == "batch"
    assert upload.expires_at - upload.created_at == 3600
    file = upload.file
    assert file is not None and file.object == "file" and file.id.startswith("file-")
    assert file.bytes == len(payload) and file.filename == "big-input.jsonl" and file.purpose == "batch"
    assert file.expires_at - file.created_at == 30 * 24 * 3600
    assert client.files.retrieve(file.id).bytes == len(payload)
    assert client.files.content(file.id).content == payload
    # The three parts are gone: no rows, and only the file's blob was added.
    assert _part_rows(server, upload.id) == []
    assert len(db.blob_files(server)) == blobs_before + 1


def test_parts_concatenate_in_the_order_given_and_expires_after_applies(client):
    upload = client.uploads.create(
        bytes=9,
        filename="notes.txt",
        mime_type="text/plain",
        purpose="user_data",
        expires_after={"anchor": "created_at", "seconds": 7200},
    )
    assert upload.status == "pending" and upload.file is None
    parts = {data: client.uploads.parts.create(upload_id=upload.id, data=data) for data in (b"aaa", b"bbb", b"ccc")}
    part = parts[b"aaa"]
    assert part.object == "upload.part" and part.upload_id == upload.id and part.id.startswith("part_")

    done = client.uploads.complete(upload_id=upload.id, part_ids=[parts[b"ccc"].id, parts[b"aaa"].id, parts[b"bbb"].id])
    assert done.status == "completed"
    assert client.files.content(done.file.id).content == b"cccaaabbb"
    assert done.file.expires_at - done.file.created_at == 7200

    # State conflicts are 409s the client does not retry (x-should-retry: false).
    with pytest.raises(openai.ConflictError, match="completed"):
        client.uploads.parts.create(upload_id=upload.id, data=b"more")
    with pytest.raises(openai.ConflictError, match="completed") as caught:
        client.uploads.complete(upload_id=upload.id, part_ids=[part.id])
    assert caught.value.response.headers["x-should-retry"] == "false"


def test_md5_mismatch_is_400_and_the_upload_stays_usable(client, server):
    data = b"hello uploads\n"
    upload = client.uploads.create(bytes=len(data), filename="h.jsonl", mime_type="text/jsonl", purpose="batch")
    part = client.uploads.parts.create(upload_id=upload.id, data=data)
    files_before = db.execute(server, "SELECT count(*) FROM files")

    with pytest.raises(openai.BadRequestError) as caught:
        client.uploads.complete(upload_id=upload.id, part_ids=[part.id], md5="0" * 32)
    assert caught.value.body["param"] == "md5" and caught.value.body["type"] == "invalid_request_error"
    assert db.execute(server, "SELECT count(*) FROM files") == files_before
    assert _status(server, upload.id) == "pending"

    done = client.uploads.complete(upload_id=upload.id, part_ids=[part.id], md5=hashlib.md5(data).hexdigest())
    assert client.files.content(done.file.id).content == data


def test_byte_count_mismatch_unknown_and_repeated_parts_are_400(client):
    upload = client.uploads.create(
        bytes=10, filename="x.bin", mime_type="application/octet-stream", purpose="user_data"
    )
    part = client.uploads.parts.create(upload_id=upload.id, data=b"12345")
    with pytest.raises(openai.BadRequestError, match=r"\(5\) does not match .* \(10\)"):
        client.uploads.complete(upload_id=upload.id, part_ids=[part.id])
    with pytest.raises(openai.BadRequestError, match="only once"):
        client.uploads.complete(upload_id=upload.id, part_ids=[part.id, part.id])
    with pytest.raises(openai.BadRequestError, match="No such Part"):
        client.uploads.complete(upload_id=upload.id, part_ids=[part.id, "part_unknown"])
    other = client.uploads.create(bytes=5, filename="y.bin", mime_type="application/octet-stream", purpose="user_data")
    # A part belongs to its own upload only.
    with pytest.raises(openai.BadRequestError, match="No such Part"):
        client.uploads.complete(upload_id=other.id, part_ids=[part.id])


def test_cancel_removes_parts_and_refuses_further_use(client, server):
    upload = client.uploads.create(bytes=6, filename="c.jsonl", mime_type="text/jsonl", purpose="batch")
    part = client.uploads.parts.create(upload_id=upload.id, data=b"abc")
    assert len(_part_rows(server, upload.id)) == 1
    blobs_with_part = len(db.blob_files(server))

    cancelled = client.uploads.cancel(upload.id)
    assert cancelled.status == "cancelled" and cancelled.id == upload.id and cancelled.file is None
    assert _part_rows(server, upload.id) == []
    assert len(db.blob_files(server)) == blobs_with_part - 1

    for call in (
        lambda: client.uploads.parts.create(upload_id=upload.id, data=b"def"),
        lambda: client.uploads.complete(upload_id=upload.id, part_ids=[part.id]),
        lambda: client.uploads.cancel(upload.id),
    ):
        with pytest.raises(openai.ConflictError, match="cancelled"):
            call()


def test_expired_upload_is_swept_with_its_parts(client, server):
    upload = client.uploads.create(bytes=6, filename="e.jsonl", mime_type="text/jsonl", purpose="batch")
    part = client.uploads.parts.create(upload_id=upload.id, data=b"abcdef")
    # Fault injection: the hour has passed.
    db.execute(server, "UPDATE uploads SET expires_at = :t WHERE id = :u", t=int(time.time()) - 1, u=upload.id)

    # The sweep (every 0.5 s on this server) marks it expired and removes its parts.
    wait_until(
        lambda: _status(server, upload.id) == "expired" and _part_rows(server, upload.id) == [],
        60,  # room for a slow hour: CI once saw more than 10 s on Postgres
        "the upload to expire and its parts to go",
    )
    with pytest.raises(openai.ConflictError, match="expired"):
        client.uploads.complete(upload_id=upload.id, part_ids=[part.id])
    with pytest.raises(openai.ConflictError, match="expired"):
        client.uploads.parts.create(upload_id=upload.id, data=b"x")


def test_unknown_or_foreign_upload_is_404(client, client_b):
    upload = client.uploads.create(bytes=1, filename="a.jsonl", mime_type="text/jsonl", purpose="batch")
    for caller, upload_id in ((client, "upload_does_not_exist"), (client_b, upload.id)):
        with pytest.raises(openai.NotFoundError):
            caller.uploads.parts.create(upload_id=upload_id, data=b"x")
        with pytest.raises(openai.NotFoundError):
            caller.uploads.complete(upload_id=upload_id, part_ids=[])
        with pytest.raises(openai.NotFoundError) as caught:
            caller.uploads.cancel(upload_id)
        assert caught.value.body["param"] == "upload_id"


def test_create_checks_are_400_in_openai_envelope(client, server):
    cases = [
        (dict(bytes=10, filename="notes.txt", mime_type="text/plain", purpose="batch"), "Must be .jsonl"),
        (dict(bytes=10, filename="a.jsonl", mime_type="text/jsonl", purpose="nonsense"), "purpose"),
        (dict(bytes=9 * 1024**3, filename="a.bin", mime_type="x/y", purpose="user_data"), "at most"),
        (dict(bytes=-1, filename="a.bin", mime_type="x/y", purpose="user_data"), "bytes"),
    ]
    for params, message in cases:
        with pytest.raises(openai.BadRequestError, match=message):
            client.uploads.create(**params)
    with pytest.raises(openai.BadRequestError) as caught:
        client.uploads.create(
            bytes=1,
            filename="a.bin",
            mime_type="x/y",
            purpose="user_data",
            expires_after={"anchor": "created_at", "seconds": 60},
        )
    assert caught.value.body["param"] == "expires_after.seconds"

    headers = {"Authorization": "Bearer key-a"}
    for body in (None, {}, {"bytes": 1}):
        response = server.http.post(f"{server.base_url}/uploads", json=body, headers=headers)
        assert response.status_code == 400
        assert response.json()["error"]["code"] == "missing_required_parameter"


def test_part_without_data_field_is_400_and_stores_nothing(client, server):
    upload = client.uploads.create(bytes=3, filename="a.jsonl", mime_type="text/jsonl", purpose="batch")
    blobs_before = len(db.blob_files(server))
    response = server.http.post(
        f"{server.base_url}/uploads/{upload.id}/parts",
        headers={"Authorization": "Bearer key-a"},
        files={"file": ("upload", b"abc")},
    )
    assert response.status_code == 400
    assert response.json()["error"]["param"] == "data"
    assert len(db.blob_files(server)) == blobs_before
    assert _part_rows(server, upload.id) == []
