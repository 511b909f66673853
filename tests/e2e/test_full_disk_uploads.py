"""A full blob filesystem (an 8 MB tmpfs under the server's blob directory; the database lives
elsewhere): uploads answer 507 in OpenAI's envelope and store nothing; once space returns,
everything works again. SQLite and Postgres."""

from __future__ import annotations

import hashlib

import httpx
import openai
import pytest

from harness.client import openai_client
from harness.server import ServerProcess
from tests.conftest import API_KEYS_ENV
from tests.support import db
from tests.support.faults import fill, tmpfs

# Real `batchd serve` processes, without models: not in make test-fast (tests/conftest.py).
pytestmark = pytest.mark.engine

MB = 1024 * 1024


@pytest.fixture(scope="module")
def disk_server(tmp_path_factory, database_factory):
    data_dir = tmp_path_factory.mktemp("full-disk")
    with tmpfs(data_dir / "blobs", "8m"):
        server = ServerProcess(data_dir, database_factory(), env={"BATCHD_API_KEYS": API_KEYS_ENV}).start()
        yield server
        server.stop()


@pytest.fixture
def disk_client(disk_server):
    return openai_client(disk_server.base_url, "key-a")


def _assert_507(exc: openai.APIStatusError) -> None:
    assert exc.status_code == 507
    assert exc.body == {
        "message": exc.body["message"],
        "type": "server_error",
        "param": None,
        "code": "insufficient_storage",
    }
    assert "nothing was stored" in exc.body["message"]


def _stored(server) -> tuple[list, list]:
    """(blob files on disk, file rows) — the filler file is not part of the store."""
    blobs = [p for p in db.blob_files(server) if p.name != "filler"]
    return blobs, db.execute(server, "SELECT id FROM files WHERE project = 'proj-a'")


def test_upload_larger_than_the_free_space_is_507_and_stores_nothing(disk_client, disk_server):
    before = _stored(disk_server)
    with pytest.raises(openai.APIStatusError) as caught:
        disk_client.files.create(file=("big.jsonl", b"x" * (12 * MB)), purpose="batch")
    _assert_507(caught.value)
    assert _stored(disk_server) == before
    # The failed upload freed what it wrote: a small one fits.
    small = disk_client.files.create(file=("small.jsonl", b'{"a": 1}\n'), purpose="batch")
    assert disk_client.files.content(small.id).content == b'{"a": 1}\n'


def test_full_disk_parts_and_completion_are_507_then_work_once_space_returns(disk_client, disk_server):
    blobs_dir = disk_server.data_dir / "blobs"
    data = hashlib.sha256(b"seed").hexdigest().encode() * (3 * MB // 64)
    upload = disk_client.uploads.create(bytes=len(data), filename="p.jsonl", mime_type="text/jsonl", purpose="batch")
    first = disk_client.uploads.parts.create(upload_id=upload.id, data=data[: len(data) // 2])

    filler = fill(blobs_dir)
    try:
        before = _stored(disk_server)
        with pytest.raises(openai.APIStatusError) as caught:
            disk_client.uploads.parts.create(upload_id=upload.id, data=data[len(data) // 2 :])
        _assert_507(caught.value)
        with pytest.raises(openai.APIStatusError) as caught:
            disk_client.files.create(file=("tiny.jsonl", b'{"a": 1}\n' * 2000), purpose="batch")
        _assert_507(caught.value)
        assert _stored(disk_server) == before
    finally:
        filler.unlink()

    second = disk_client.uploads.parts.create(upload_id=upload.id, data=data[len(data) // 2 :])
    # Completion needs room for the whole file next to its parts: 3 MB of parts + 3 MB file.
    filler = fill(blobs_dir)
    filler.write_bytes(b"\0" * (3 * MB))  # leaves about 5 MB minus the parts: under 3 MB free
    try:
        with pytest.raises(openai.APIStatusError) as caught:
            disk_client.uploads.complete(upload_id=upload.id, part_ids=[first.id, second.id])
        _assert_507(caught.value)
        assert db.execute(disk_server, "SELECT status FROM uploads WHERE id = :u", u=upload.id) == [("pending",)]
    finally:
        filler.unlink()

    done = disk_client.uploads.complete(upload_id=upload.id, part_ids=[first.id, second.id])
    assert disk_client.files.content(done.file.id).content == data
    assert httpx.get(f"{disk_server.base_url}/files", headers={"Authorization": "Bearer key-a"}).status_code == 200
