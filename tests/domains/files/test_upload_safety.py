"""Upload limits and failures: 413s in OpenAI's envelope, and nothing left behind when an upload
fails or meets a locked database (an upload aborted mid-stream: tests/e2e/test_aborted_upload.py)."""

from __future__ import annotations

import sqlite3

import openai
import pytest

from tests.support import db
from tests.support.app_server import AppServer

MB = 1024 * 1024


@pytest.fixture(scope="module")
def small_server(start_app):
    return start_app(
        {
            "BATCHD_MAX_FILE_BYTES": str(4 * MB),
            "BATCHD_MAX_BATCH_FILE_BYTES": str(1 * MB),
            "BATCHD_SQLITE_BUSY_TIMEOUT_MS": "300",
        }
    )


@pytest.fixture
def small_client(small_server):
    return small_server.client("any")


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


@pytest.fixture(scope="module")
def sqlite_server(tmp_path_factory):
    """SQLite-only (its single-writer lock is the subject), whatever the session's backend."""
    with AppServer(tmp_path_factory.mktemp("locked"), env={"BATCHD_SQLITE_BUSY_TIMEOUT_MS": "300"}) as server:
        yield server


def test_locked_sqlite_is_503_with_retry_after_and_loses_nothing(sqlite_server):
    small_server = sqlite_server
    small_client = sqlite_server.client("any")
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
