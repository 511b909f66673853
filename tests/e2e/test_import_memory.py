"""A 300 MB file imported by reference (from `s3://` and from a presigned GET URL of the same S3
server) streams into the store: the server's memory does not grow with the file (< 50 MB, into the
local store and into S3, whose writer holds a few multipart parts)."""

from __future__ import annotations

import time

import pytest

from harness.client import openai_client
from harness.rss import TreeRss
from harness.seaweedfs import client as s3_client
from harness.server import ServerProcess
from tests.e2e.test_upload_memory import _downloaded_sha256, big_file  # noqa: F401 - the fixture
from tests.support.s3 import S3Location

# A real `batchd serve` process, without models: not in make test-fast (tests/conftest.py).
pytestmark = pytest.mark.engine

MB = 1024 * 1024
KEY = "inputs/big.jsonl"
SMALL = "inputs/small.jsonl"


def _presigned(seaweedfs, source: S3Location, key: str) -> str:
    return s3_client(seaweedfs).generate_presigned_url(
        "get_object", Params={"Bucket": source.bucket, "Key": key}, ExpiresIn=600
    )


@pytest.fixture(scope="module")
def source(seaweedfs, big_file) -> S3Location:  # noqa: F811
    """The 300 MB file as an object, in a bucket apart from the server's blobs."""
    location = S3Location.fresh(seaweedfs)
    path, _ = big_file
    with path.open("rb") as fh:
        s3_client(seaweedfs).put_object(Bucket=location.bucket, Key=KEY, Body=fh)
    return location


@pytest.fixture(scope="module", params=["local", "s3"])
def server(request, seaweedfs, source, tmp_path_factory):
    """SQLite and, in turn, each blob store: the local directory (the import's S3 reads go
    through a client of their own) and an S3 bucket (the store's client reads and writes)."""
    store = S3Location.fresh(seaweedfs) if request.param == "s3" else None
    env = {
        "BATCHD_MAX_BATCH_FILE_BYTES": str(512 * MB),
        "BATCHD_IMPORT_ALLOWED_URIS": f"s3://{source.bucket}/inputs/",
        "BATCHD_OUTBOUND_ALLOW": "127.0.0.1",
    }
    if store is None:  # the S3 server and credentials for the import's reads only
        env.update({k: v for k, v in seaweedfs.env(source.bucket).items() if k != "BATCHD_STORAGE_URL"})
    server = ServerProcess(tmp_path_factory.mktemp("import-memory"), s3=store, env=env).start()
    # One small import each way first: what a first import loads (its code paths, a TLS-ready
    # HTTP client, the S3 client's first connections) is not the file's size.
    s3_client(seaweedfs).put_object(Bucket=source.bucket, Key=SMALL, Body=b'{"custom_id": "w"}\n')
    client = openai_client(server.base_url, "x", timeout=600)
    for url in (f"s3://{source.bucket}/{SMALL}", _presigned(seaweedfs, source, SMALL)):
        client.post("/files", body={"purpose": "batch", "url": url}, cast_to=dict)
    yield server
    server.stop()


def _import(server: ServerProcess, url: str) -> dict:
    client = openai_client(server.base_url, "x", timeout=600)
    with TreeRss(server.pid, interval=0.02) as rss:
        began = time.monotonic()
        file = client.post("/files", body={"purpose": "batch", "url": url}, cast_to=dict)
        seconds = time.monotonic() - began
    size = file["bytes"] / MB
    print(f"server RSS growth during a {size:.0f} MB import: {rss.growth / MB:.1f} MB ({size / seconds:.0f} MB/s)")
    # Into S3 too: the store's writer holds one part filling and PARTS_IN_FLIGHT going up, each
    # once (app/storage/s3.py), about 26 MB of the bound.
    assert rss.growth < 50 * MB
    return file


def test_300_mb_import_from_s3_keeps_server_rss_flat(server, source, big_file):  # noqa: F811
    path, sha256 = big_file
    file = _import(server, f"s3://{source.bucket}/{KEY}")
    assert file["bytes"] == path.stat().st_size
    assert _downloaded_sha256(openai_client(server.base_url, "x", timeout=600), file["id"]) == sha256


def test_300_mb_import_from_a_presigned_url_keeps_server_rss_flat(
    server,
    source,
    seaweedfs,
    big_file,  # noqa: F811
):
    path, sha256 = big_file
    file = _import(server, _presigned(seaweedfs, source, KEY))
    assert file["bytes"] == path.stat().st_size
    assert _downloaded_sha256(openai_client(server.base_url, "x", timeout=600), file["id"]) == sha256
