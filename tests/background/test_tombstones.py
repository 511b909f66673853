"""The tombstone purges (app/background/tombstones.py) on each backend's database: a deleted file
or batch keeps its row through the grace period (its id still a list cursor), then the row goes;
a batch's shards and chunks go with it."""

from __future__ import annotations

import time

from app.background.tombstones import purge_batch_tombstones, purge_file_tombstones
from app.core.statuses import BatchStatus
from app.db.engine import Database
from app.db.models import Batch, BatchChunk, File
from app.storage.local import LocalBlobStore
from tests.background.support import add_batch, add_chunk, add_file, ids
from tests.support.database import run_on_database

GRACE = 7 * 86_400


def test_file_tombstones_go_after_the_grace_period(db_url, tmp_path):
    async def scenario(db: Database) -> None:
        store, now = LocalBlobStore(tmp_path / "blobs"), int(time.time())
        await add_file(db, store, "file-old", deleted_at=now - GRACE - 60)
        await add_file(db, store, "file-recent", deleted_at=now - 60)
        await add_file(db, store, "file-live")
        assert await purge_file_tombstones(db, GRACE) == 1
        assert await ids(db, File.id) == {"file-recent", "file-live"}
        assert await purge_file_tombstones(db, GRACE) == 0

    run_on_database(db_url, scenario)


def test_batch_tombstones_go_after_the_grace_period_with_their_chunks(db_url, tmp_path):
    async def scenario(db: Database) -> None:
        store, now = LocalBlobStore(tmp_path / "blobs"), int(time.time())
        await add_batch(db, "batch-old", BatchStatus.COMPLETED, completed_at=0, deleted_at=now - GRACE - 60)
        await add_chunk(db, store, "batch-old", "chunk-old")
        await add_batch(db, "batch-recent", BatchStatus.COMPLETED, completed_at=0, deleted_at=now - 60)
        await add_batch(db, "batch-live", BatchStatus.COMPLETED, completed_at=0)
        assert await purge_batch_tombstones(db, GRACE) == 1
        assert await ids(db, Batch.id) == {"batch-recent", "batch-live"}
        assert await ids(db, BatchChunk.batch_id) == set()
        assert await purge_batch_tombstones(db, GRACE) == 0

    run_on_database(db_url, scenario)
