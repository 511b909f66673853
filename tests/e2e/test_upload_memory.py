"""A 300 MB upload streams to the store (disk, or an S3 multipart upload): the server's memory
does not grow with the file, whether it arrives in one request (`files.create`) or in parts
(`uploads.upload_file_chunked`)."""

from __future__ import annotations

import hashlib

import openai
import pytest

from harness.client import openai_client
from harness.rss import TreeRss
from harness.server import ServerProcess
from tests.support import db
from tests.support.s3 import S3Location

# Real `batchd serve` processes, without models: not in make test-fast (tests/conftest.py).
pytestmark = pytest.mark.engine

MB = 1024 * 1024


@pytest.fixture(scope="module", params=["local", "s3"])
def server(request, tmp_path_factory):
    """SQLite and, in turn, each blob store: the local directory and an S3 bucket."""
    s3 = S3Location.fresh(request.getfixturevalue("seaweedfs")) if request.param == "s3" else None
    # A 300 MB batch file (the chunked upload) is above the default 200 MB batch-file limit.
    server = ServerProcess(
        tmp_path_factory.mktemp("memory"), s3=s3, env={"BATCHD_MAX_BATCH_FILE_BYTES": str(512 * MB)}
    ).start()
    yield server
    server.stop()


@pytest.fixture(scope="module")
def big_file(tmp_path_factory):
    """A 300 MB JSONL file and its sha256."""
    path = tmp_path_factory.mktemp("big") / "big.jsonl"
    line = b'{"custom_id": "c", "body": "' + b"z" * 1000 + b'"}\n'
    digest = hashlib.sha256()
    with path.open("wb") as fh:
        for _ in range(300 * MB // len(line)):
            fh.write(line)
            digest.update(line)
    assert path.stat().st_size > 299 * MB
    yield path, digest.hexdigest()
    path.unlink()


def _downloaded_sha256(client: openai.OpenAI, file_id: str) -> str:
    downloaded = hashlib.sha256()
    with client.files.with_streaming_response.content(file_id) as response:
        for chunk in response.iter_bytes(MB):
            downloaded.update(chunk)
    return downloaded.hexdigest()


def test_300_mb_upload_keeps_server_rss_growth_under_100_mb(server, big_file):
    path, sha256 = big_file
    size = path.stat().st_size
    client = openai_client(server.base_url, "x", timeout=600)
    with TreeRss(server.pid, interval=0.02) as rss:
        file = client.files.create(file=path, purpose="user_data")
    assert file.bytes == size
    print(f"server RSS growth during a {size / MB:.0f} MB upload: {rss.growth / MB:.1f} MB")
    assert rss.growth < 100 * MB
    assert _downloaded_sha256(client, file.id) == sha256


def test_300_mb_chunked_upload_keeps_server_rss_growth_under_100_mb(server, big_file):
    path, sha256 = big_file
    size = path.stat().st_size
    client = openai_client(server.base_url, "x", timeout=600)
    with TreeRss(server.pid, interval=0.02) as rss:
        upload = client.uploads.upload_file_chunked(
            file=path, mime_type="text/jsonl", purpose="batch", part_size=64 * MB
        )
    assert upload.status == "completed" and upload.file.bytes == size and upload.bytes == size
    print(
        f"server RSS growth during a {size / MB:.0f} MB chunked upload (5 parts + completion): {rss.growth / MB:.1f} MB"
    )
    assert rss.growth < 100 * MB
    assert _downloaded_sha256(client, upload.file.id) == sha256
    # The parts were removed once the file existed.
    assert db.execute(server, "SELECT count(*) FROM upload_parts") == [(0,)]
