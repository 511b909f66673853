"""Orphan blobs: a process that dies between a delete's commit and the blob's removal, or between
an upload's blob commit and its row's commit, leaves a blob no live row names. A restarted
server removes such blobs once they are older than BATCHD_ORPHAN_BLOB_MIN_AGE (an hour by
default, so uploads another replica is finishing are safe), and keeps every live file's."""

from __future__ import annotations

import time

import pytest

from harness.client import openai_client
from harness.poll import wait_until
from harness.server import ServerProcess
from tests.support import db

# Real `batchd serve` processes, without models: not in make test-fast (tests/conftest.py).
pytestmark = pytest.mark.engine

# Seconds between the old orphan and the other blobs: the server must start and run its pass
# within this less a second (S3 keeps whole seconds), or the younger blobs count as old too.
OLDER = 10


def test_restart_removes_old_orphan_blobs_and_keeps_live_ones(tmp_path, database_factory, storage_factory):
    data_dir, database_url, s3 = tmp_path / "data", database_factory(), storage_factory()

    def start(min_age: str) -> ServerProcess:
        env = {"BATCHD_ORPHAN_BLOB_MIN_AGE": min_age}
        return ServerProcess(data_dir, database_url, env=env, s3=s3).start()

    server = start("3600")
    client = openai_client(server.base_url, "any")
    # An orphan older than the others by OLDER seconds, so a pass with a minimum age between the
    # two ages removes it and keeps the others: the proof that such a pass ran.
    old = client.files.create(file=("old.jsonl", b"{}\n"), purpose="batch")
    created = time.time()
    db.execute(server, "DELETE FROM files WHERE id = :id", id=old.id)
    time.sleep(OLDER)  # not a wait for the server: the blobs made next must be younger
    live, rowless, tombstone = (
        client.files.create(file=(f"{n}.jsonl", b"{}\n"), purpose="batch") for n in ("live", "rowless", "tombstone")
    )
    # A pending upload's part has no file row, yet is live.
    upload = client.uploads.create(bytes=3, filename="u.jsonl", mime_type="text/jsonl", purpose="batch")
    part = client.uploads.parts.create(upload_id=upload.id, data=b"{}\n")
    # Died after the blob commit, before the row's: the row never landed.
    db.execute(server, "DELETE FROM files WHERE id = :id", id=rowless.id)
    # Died after the delete's commit, before the blob's removal: a tombstone, blob still there.
    db.execute(server, "UPDATE files SET deleted_at = :t WHERE id = :id", t=int(time.time()), id=tombstone.id)
    server.stop()
    assert all(db.has_blob(server, "default", f.id) for f in (old, live, rowless, tombstone))

    # Younger than the minimum age: could be an upload still finishing elsewhere, so kept. The
    # minimum age is the old orphan's age now: the pass (at start) takes it, not the others.
    server = start(str(time.time() - created))
    wait_until(lambda: not db.has_blob(server, "default", old.id), timeout=15, what="the old orphan removed")
    assert all(db.has_blob(server, "default", f.id) for f in (live, rowless, tombstone))
    server.stop()

    server = start("0")
    # One pass removes both, one blob at a time in no set order: wait for the pair.
    gone = lambda: not any(db.has_blob(server, "default", f.id) for f in (rowless, tombstone))  # noqa: E731
    wait_until(gone, timeout=15, what="the rowless blob and the tombstone's blob removed")
    assert db.has_blob(server, "default", live.id)
    assert db.has_blob(server, "default", part.id)
    client = openai_client(server.base_url, "any")
    assert client.files.content(live.id).content == b"{}\n"
    done = client.uploads.complete(upload_id=upload.id, part_ids=[part.id])
    assert client.files.content(done.file.id).content == b"{}\n"
    server.stop()
