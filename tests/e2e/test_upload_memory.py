"""A 300 MB upload streams to the store (disk, or an S3 multipart upload): the server's memory
does not grow with the file."""

from __future__ import annotations

import hashlib

import openai
import pytest

from tests.support.rss import PeakRss
from tests.support.s3 import S3Location
from tests.support.server import ServerProcess

MB = 1024 * 1024


@pytest.fixture(scope="module", params=["local", "s3"])
def server(request, tmp_path_factory):
    """SQLite and, in turn, each blob store: the local directory and an S3 bucket."""
    s3 = S3Location.fresh(request.getfixturevalue("seaweedfs")) if request.param == "s3" else None
    server = ServerProcess(tmp_path_factory.mktemp("memory"), s3=s3).start()
    yield server
    server.stop()


def test_300_mb_upload_keeps_server_rss_growth_under_100_mb(server, tmp_path):
    path = tmp_path / "big.jsonl"
    line = b'{"custom_id": "c", "body": "' + b"z" * 1000 + b'"}\n'
    digest = hashlib.sha256()
    with path.open("wb") as fh:
        for _ in range(300 * MB // len(line)):
            fh.write(line)
            digest.update(line)
    size = path.stat().st_size
    assert size > 299 * MB

    client = openai.OpenAI(base_url=server.base_url, api_key="x", max_retries=0, timeout=600)
    with PeakRss(server.pid) as rss:
        file = client.files.create(file=path, purpose="user_data")
    assert file.bytes == size
    print(f"server RSS growth during a {size / MB:.0f} MB upload: {rss.growth / MB:.1f} MB")
    assert rss.growth < 100 * MB

    downloaded = hashlib.sha256()
    with client.files.with_streaming_response.content(file.id) as response:
        for chunk in response.iter_bytes(MB):
            downloaded.update(chunk)
    assert downloaded.hexdigest() == digest.hexdigest()
