"""An upload whose connection drops mid-stream leaves nothing behind: a real socket closed under
a real `batchd serve` (moved from tests/domains/files/test_upload_safety.py, whose other tests run in process)."""

from __future__ import annotations

import socket

import pytest

from app.storage.s3 import PART_BYTES
from harness.poll import wait_until
from tests.support import db
from tests.support.uploads import upload_head

# Real `batchd serve` processes, without models: not in make test-fast (tests/conftest.py).
pytestmark = pytest.mark.engine

MB = 1024 * 1024


def _file_rows(server) -> int:
    return db.execute(server, "SELECT count(*) FROM files")[0][0]


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
