"""Upload limits and failures: 413s in OpenAI's envelope, and nothing left behind when an upload
fails, is aborted, or meets a locked database."""

from __future__ import annotations

import socket
import sqlite3

import openai
import pytest

from app.storage.s3 import PART_BYTES
from harness.client import openai_client
from harness.poll import wait_until
from harness.server import ServerProcess
from tests.support import db
from tests.support.uploads import upload_head

MB = 1024 * 1024


@pytest.fixture(scope="module")
def small_server(start_server):
    return start_server(
        {
            "BATCHD_MAX_FILE_BYTES": str(4 * MB),
            "BATCHD_MAX_BATCH_FILE_BYTES": str(1 * MB),
            "BATCHD_SQLITE_BUSY_TIMEOUT_MS": "300",
        }
    )


@pytest.fixture
def small_client(small_server):
    return openai_client(small_server.base_url, "any")


def _file_rows(server) -> int:
    return db.execute(server, "SELECT count(*) FROM files")[0][0]


def test_batch_file_over_its_limit_is_413_while_streaming(small_client, small_server):
    rows, blobs = _file_rows(small_server), db.blob_files(small_server)
    line = b'{"custom_id": "x", "pad": "' + b"a" * 1000 + b'"}\n'
    payload = line * (2 * MB // len(line))  # 2 MB: over the 1 MB batch limit, under the 4 MB file limit
    with pytest.raises(openai.APIStatusError) as info:
        small_client.files.create(file=("big.jsonl", payload), purpose="batch")
    assert info.value.status_code == 413
    assert info.value.body == {
        "message": f"File is too large: the maximum size for purpose 'batch' is {MB} bytes.",
        "type": "invalid_request_error",
        "param": "file",
        "code": "file_too_large",
    }
    assert _file_rows(small_server) == rows
    assert db.blob_files(small_server) == blobs
    # The same bytes are fine for a purpose with the larger limit.
    assert small_client.files.create(file=("big.jsonl", payload), purpose="user_data").bytes == len(payload)


def test_file_over_the_global_limit_is_413_before_reading(small_client, small_server):
    rows, blobs = _file_rows(small_server), db.blob_files(small_server)
    with pytest.raises(openai.APIStatusError) as info:
        small_client.files.create(file=("huge.bin", b"\0" * (5 * MB)), purpose="user_data")
    assert info.value.status_code == 413
    assert info.value.body["message"] == f"File is too large: the maximum size is {4 * MB} bytes."
    assert _file_rows(small_server) == rows
    assert db.blob_files(small_server) == blobs


def test_aborted_upload_leaves_no_row_and_no_blob(start_server):
    # Default limits: the upload is larger than one S3 part, so on S3 too a partial write (a
    # multipart upload begun) exists mid-stream.
    server = start_server()
    rows, blobs = _file_rows(server), db.blob_files(server)
    with socket.create_connection(("127.0.0.1", server.port)) as sock:
        sock.sendall(upload_head(PART_BYTES + 2 * MB) + b"x" * (PART_BYTES + MB))
        # The server is now mid-stream, with a partial write in the store.
        partial = wait_until(
            lambda: set(map(str, db.blob_files(server))) - set(map(str, blobs)), what="a partial write"
        )
    wait_until(lambda: db.blob_files(server) == blobs, timeout=10, what=f"{partial} removed")
    assert _file_rows(server) == rows


@pytest.fixture(scope="module")
def sqlite_server(tmp_path_factory):
    """SQLite-only (its single-writer lock is the subject), whatever the session's backend."""
    server = ServerProcess(tmp_path_factory.mktemp("locked"), env={"BATCHD_SQLITE_BUSY_TIMEOUT_MS": "300"}).start()
    yield server
    server.stop()


def test_locked_sqlite_is_503_with_retry_after_and_loses_nothing(sqlite_server):
    small_server = sqlite_server
    small_client = openai_client(sqlite_server.base_url, "any")
    kept = small_client.files.create(file=("kept.jsonl", b"{}\n"), purpose="batch")
    rows, blobs = _file_rows(small_server), db.blob_files(small_server)
    locker = sqlite3.connect(small_server.data_dir / "batchd.db", isolation_level=None)
    locker.execute("BEGIN EXCLUSIVE")
    try:
        with pytest.raises(openai.InternalServerError) as info:
            small_client.files.create(file=("locked.jsonl", b"{}\n"), purpose="batch")
    finally:
        locker.execute("ROLLBACK")
        locker.close()
    assert info.value.status_code == 503
    assert info.value.response.headers["retry-after"] == "1"
    assert info.value.response.headers["x-should-retry"] == "true"
    assert info.value.body["type"] == "server_error"
    assert _file_rows(small_server) == rows
    assert db.blob_files(small_server) == blobs
    # Once the lock is gone the same request works, and what was stored before is intact.
    assert small_client.files.create(file=("locked.jsonl", b"{}\n"), purpose="batch").bytes == 3
    assert small_client.files.content(kept.id).content == b"{}\n"
