"""S3 server-side encryption (BATCHD_S3_SSE, BATCHD_S3_SSE_KMS_KEY_ID), against the session's
SeaweedFS, which honours both kinds (harness/seaweedfs.py): every request that makes an object (a
single PUT, the creation of a multipart upload, the copy of a temp object) carries the SSE headers,
as a botocore hook on the store's own client records them going out; the server reports each
object encrypted the asked way; the bytes read back. The settings refuse an unknown kind and a KMS
key without `aws:kms`, and `batchd serve` says so in one line."""

from __future__ import annotations

import asyncio
import os

import pytest
from pydantic import ValidationError

from app.cli import main
from app.core.config import Settings
from app.storage import open_store
from app.storage.s3 import PART_BYTES
from harness.seaweedfs import KMS_KEY_ID
from tests.support.s3 import S3Location

WRITES = ("PutObject", "CreateMultipartUpload", "CopyObject")
BIG = os.urandom(PART_BYTES + 4321)  # two parts


async def _write(store, data: bytes, project: str, file_id: str | None) -> None:
    writer = store.new_writer(project, file_id)
    for start in range(0, len(data), 1024 * 1024):
        writer.write(data[start : start + 1024 * 1024])
        await writer.drain()
    await store.commit(writer, project, file_id or "file-unnamed")


async def _read(store, project: str, file_id: str) -> bytes:
    return b"".join([chunk async for chunk in store.read(project, file_id)])


@pytest.mark.parametrize(("sse", "key_id"), [("AES256", ""), ("aws:kms", KMS_KEY_ID)], ids=["sse-s3", "sse-kms"])
def test_every_object_write_asks_for_encryption_and_reads_back(seaweedfs, monkeypatch, sse, key_id):
    location = S3Location.fresh(seaweedfs)
    for name, value in {**location.env(), "BATCHD_S3_SSE": sse, "BATCHD_S3_SSE_KMS_KEY_ID": key_id}.items():
        monkeypatch.setenv(name, value)
    store = open_store(Settings())
    sent: list[tuple[str, dict[str, str]]] = []

    def record(request, event_name: str, **_) -> None:
        headers = {
            name.lower(): value.decode() if isinstance(value, bytes) else value
            for name, value in request.headers.items()
        }
        sent.append((event_name.rsplit(".", 1)[-1], headers))

    async def run() -> None:
        client = await store.client()
        client.meta.events.register("before-send.s3", record)
        try:
            await _write(store, b"small", "proj", "file-small")  # one PUT
            await _write(store, BIG, "proj", "file-named")  # a multipart upload to its key
            await _write(store, BIG, "proj", None)  # a multipart upload to a temp key, then a copy
            assert await _read(store, "proj", "file-small") == b"small"
            for file_id in ("file-named", "file-unnamed"):
                assert await _read(store, "proj", file_id) == BIG
                head = await client.head_object(Bucket=store.bucket, Key=store.blob_name("proj", file_id))
                assert head["ServerSideEncryption"] == sse
            head = await client.head_object(Bucket=store.bucket, Key=store.blob_name("proj", "file-small"))
            assert head["ServerSideEncryption"] == sse
            if key_id:
                assert head["SSEKMSKeyId"]  # the server names the key it used
        finally:
            await store.close()

    asyncio.run(run())
    writes = [(operation, headers) for operation, headers in sent if operation in WRITES]
    assert sorted(operation for operation, _ in writes) == [
        "CopyObject",
        "CreateMultipartUpload",
        "CreateMultipartUpload",
        "PutObject",
    ]
    expected = {"x-amz-server-side-encryption": sse}
    if key_id:
        expected["x-amz-server-side-encryption-aws-kms-key-id"] = key_id
    for operation, headers in writes:
        assert {name: headers.get(name) for name in expected} == expected, operation


@pytest.mark.parametrize(
    ("env", "message"),
    [
        ({"BATCHD_S3_SSE": "aes256"}, "Input should be '', 'AES256' or 'aws:kms'"),
        ({"BATCHD_S3_SSE_KMS_KEY_ID": "alias/k"}, "only used with BATCHD_S3_SSE=aws:kms"),
        ({"BATCHD_S3_SSE": "AES256", "BATCHD_S3_SSE_KMS_KEY_ID": "alias/k"}, "only used with BATCHD_S3_SSE=aws:kms"),
    ],
)
def test_a_wrong_encryption_setting_stops_the_server_with_one_clear_line(tmp_path, monkeypatch, env, message):
    for name, value in env.items():
        monkeypatch.setenv(name, value)
    with pytest.raises(ValidationError, match=message):
        Settings()
    with pytest.raises(SystemExit) as stopped:
        main(["serve", "--data-dir", str(tmp_path)])
    assert str(stopped.value).startswith("batchd: ") and message in str(stopped.value)
    assert not any(tmp_path.iterdir())  # refused before anything was made


def test_without_the_setting_no_encryption_is_asked_for():
    assert Settings().s3_encryption() == {}
    assert Settings(s3_sse="aws:kms").s3_encryption() == {"ServerSideEncryption": "aws:kms"}
