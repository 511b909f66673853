"""Uploads big enough to leave partial writes behind (on S3: multipart uploads with parts sent),
then cut off by the size limit or by the client: nothing stays in the store. And a bucket that
does not exist stops the server at start with a clear message."""

from __future__ import annotations

import socket

import openai
import pytest

from harness.client import openai_client
from harness.poll import wait_until
from harness.server import ServerProcess
from tests.support import db
from tests.support.s3 import S3Location
from tests.support.uploads import upload_head

MB = 1024 * 1024
# Over the S3 store's 8 MiB part size, so a multipart upload has begun when the upload stops.
BATCH_LIMIT = 12 * MB


@pytest.fixture(scope="module")
def part_server(start_server):
    return start_server({"BATCHD_MAX_BATCH_FILE_BYTES": str(BATCH_LIMIT)})


def test_over_the_limit_after_parts_were_sent_is_413_and_leaves_nothing(part_server):
    before = db.blob_files(part_server)
    rows = db.execute(part_server, "SELECT count(*) FROM files")
    client = openai_client(part_server.base_url, "any", timeout=120)
    line = b'{"custom_id": "x", "pad": "' + b"a" * 1000 + b'"}\n'
    with pytest.raises(openai.APIStatusError) as info:
        client.files.create(file=("big.jsonl", line * (20 * MB // len(line))), purpose="batch")
    assert info.value.status_code == 413
    assert info.value.body["code"] == "file_too_large"
    assert db.blob_files(part_server) == before  # no object, no unfinished multipart upload
    assert db.execute(part_server, "SELECT count(*) FROM files") == rows


def test_upload_cut_off_mid_body_leaves_nothing(part_server):
    before = db.blob_files(part_server)
    with socket.create_connection(("127.0.0.1", part_server.port)) as sock:
        sock.sendall(upload_head(40 * MB))
        for _ in range(20):
            sock.sendall(b"x" * MB)
        # Mid-stream: a temp file (local) or a multipart upload with parts in it (S3) exists now.
        wait_until(lambda: db.blob_files(part_server) != before, 15, "the partial write")
    wait_until(lambda: db.blob_files(part_server) == before, 15, "the partial write removed")


def test_a_missing_bucket_stops_the_server_with_a_clear_message(seaweedfs, tmp_path):
    missing = S3Location(seaweedfs, "batchd-no-such-bucket")
    server = ServerProcess(tmp_path / "data", s3=missing)
    with pytest.raises(RuntimeError) as info:
        server.start(timeout=60)
    server.stop()
    assert "S3 bucket 'batchd-no-such-bucket' does not exist" in str(info.value)
