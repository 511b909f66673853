"""The expiry passes (app/background/expiry.py) on each backend's database, one at a time as the
sweeper runs them: expired files become tombstones without blobs, uploads past their hour stop
taking parts and every finished upload loses its parts, and an ended batch's results go once its
output files would have (rows, then blobs). A second pass finds nothing more."""

from __future__ import annotations

import time

from sqlalchemy import select, update

from app.background.expiry import (
    sweep_expired_files,
    sweep_expired_results,
    sweep_idempotency_keys,
    sweep_uploads,
)
from app.core.statuses import BatchStatus, UploadStatus
from app.db.engine import Database
from app.db.models import Batch, File, IdempotencyKey, Upload, UploadPart
from app.schemas.common import MAX_EXPIRY_SECONDS
from app.storage.local import LocalBlobStore
from tests.background.support import PROJECT, add_batch, add_chunk, add_file, add_upload, chunk_blobs, ids
from tests.support.database import run_on_database


def test_expired_files_become_tombstones_and_lose_their_blobs(db_url, tmp_path):
    async def scenario(db: Database) -> None:
        store, now = LocalBlobStore(tmp_path / "blobs"), int(time.time())
        for file_id in ("file-expired-1", "file-expired-2"):
            await add_file(db, store, file_id, expires_at=now - 1)
        await add_file(db, store, "file-later", expires_at=now + 3600)
        await add_file(db, store, "file-kept")
        # One file per transaction: the pass goes on until a short one.
        assert await sweep_expired_files(db, store, batch_size=1) == 2
        async with db.read() as session:
            deleted = set((await session.scalars(select(File.id).where(File.deleted_at.is_not(None)))).all())
        assert deleted == {"file-expired-1", "file-expired-2"}
        assert not await store.exists(PROJECT, "file-expired-1") and not await store.exists(PROJECT, "file-expired-2")
        assert await store.exists(PROJECT, "file-later") and await store.exists(PROJECT, "file-kept")
        assert await sweep_expired_files(db, store) == 0

    run_on_database(db_url, scenario)


def test_expired_and_finished_uploads_lose_their_parts(db_url, tmp_path):
    async def scenario(db: Database) -> None:
        store, now = LocalBlobStore(tmp_path / "blobs"), int(time.time())
        await add_upload(db, store, "upload-due", UploadStatus.PENDING, expires_at=now - 1)
        await add_upload(db, store, "upload-pending", UploadStatus.PENDING, expires_at=now + 3600)
        await add_upload(db, store, "upload-completed", UploadStatus.COMPLETED, expires_at=now + 3600)
        assert await sweep_uploads(db, store) == 2
        async with db.read() as session:
            statuses = {
                upload_id: status for upload_id, status in await session.execute(select(Upload.id, Upload.status))
            }
        assert statuses == {
            "upload-due": UploadStatus.EXPIRED,
            "upload-pending": UploadStatus.PENDING,
            "upload-completed": UploadStatus.COMPLETED,
        }
        assert await ids(db, UploadPart.id) == {"upload-pending-part"}
        assert not await store.exists(PROJECT, "upload-due-part")
        assert not await store.exists(PROJECT, "upload-completed-part")
        assert await store.exists(PROJECT, "upload-pending-part")
        assert await sweep_uploads(db, store) == 0

    run_on_database(db_url, scenario)


def test_results_go_when_the_batch_output_files_would(db_url, tmp_path):
    async def scenario(db: Database) -> None:
        store, now = LocalBlobStore(tmp_path / "blobs"), int(time.time())
        await add_batch(db, "batch-done", BatchStatus.COMPLETED, completed_at=now)
        for blob_id in ("chunk-0", "chunk-1"):
            await add_chunk(db, store, "batch-done", blob_id)
        # Its own `output_expires_after` (an hour), ended longer ago than that.
        await add_batch(db, "batch-short", BatchStatus.CANCELLED, cancelled_at=now - 3601, output_expires_after=3600)
        await add_chunk(db, store, "batch-short", "chunk-short")
        await add_batch(db, "batch-running", BatchStatus.IN_PROGRESS, in_progress_at=0)
        await add_chunk(db, store, "batch-running", "chunk-running")

        assert await sweep_expired_results(db, store) == 1
        assert await chunk_blobs(db) == {"chunk-0", "chunk-1", "chunk-running"}
        assert not await store.exists(PROJECT, "chunk-short")
        # Kept as long as output files are by default (30 days), then rows and blobs go.
        async with db.write() as session:
            ended = now - MAX_EXPIRY_SECONDS
            await session.execute(update(Batch).where(Batch.id == "batch-done").values(completed_at=ended))
        assert await sweep_expired_results(db, store) == 2
        assert await chunk_blobs(db) == {"chunk-running"}
        assert not await store.exists(PROJECT, "chunk-0") and not await store.exists(PROJECT, "chunk-1")
        assert await store.exists(PROJECT, "chunk-running")

    run_on_database(db_url, scenario)


def test_idempotency_keys_past_their_hours_are_forgotten(db_url):
    async def scenario(db: Database) -> None:
        now = time.time()
        async with db.write() as session:
            session.add_all(
                IdempotencyKey(project=PROJECT, key=key, created_at=created_at, status_code=200, body=b"{}")
                for key, created_at in (("old", now - 7200), ("new", now - 60))
            )
        assert await sweep_idempotency_keys(db, keep_seconds=3600) == 1
        assert await ids(db, IdempotencyKey.key) == {"new"}
        assert await sweep_idempotency_keys(db, keep_seconds=3600) == 0

    run_on_database(db_url, scenario)
