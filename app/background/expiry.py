"""Expiry: files past their `expires_at`, uploads past their hour (and every finished upload's
parts), the results of ended batches kept as long as their output files are, and
Idempotency-Keys past their hours. Rows go
first, in short write transactions; blobs after each commit."""

from __future__ import annotations

import time

from app.db.engine import Database
from app.db.repositories.chunks import ChunkRepository
from app.db.repositories.files import FileRepository
from app.db.repositories.idempotency_keys import IdempotencyKeyRepository
from app.domains.files.uploads import remove_parts
from app.domains.files.uploads_repository import UploadRepository
from app.schemas.common import MAX_EXPIRY_SECONDS
from app.storage.base import BlobStore


async def sweep_expired_files(db: Database, store: BlobStore, batch_size: int = 500) -> int:
    """Delete expired files: rows become tombstones, then their blobs are removed."""
    swept = 0
    while True:
        async with db.write() as session:
            files = await FileRepository(session).take_expired(int(time.time()), batch_size)
        for file in files:
            await store.delete(file.project, file.id)
        swept += len(files)
        if len(files) < batch_size:
            return swept


async def sweep_uploads(db: Database, store: BlobStore) -> int:
    """Expire pending uploads past their hour and remove every finished upload's parts."""
    async with db.write() as session:
        await UploadRepository(session).expire_due(int(time.time()))
    return await remove_parts(db, store)


async def sweep_expired_results(db: Database, store: BlobStore, batch_size: int = 500) -> int:
    """Delete the chunks (rows, then blobs) of batches whose results expired; returns how many."""
    swept = 0
    while True:
        async with db.write() as session:
            blobs = await ChunkRepository(session).take_expired(int(time.time()), MAX_EXPIRY_SECONDS, batch_size)
        for project, blob_id in blobs:
            await store.delete(project, blob_id)
        swept += len(blobs)
        if len(blobs) < batch_size:
            return swept


async def sweep_idempotency_keys(db: Database, keep_seconds: float) -> int:
    """Forget the Idempotency-Keys first used more than `keep_seconds` ago (a request finds an
    expired one expired anyway: app/http/idempotency_store.py); how many."""
    async with db.write() as session:
        return await IdempotencyKeyRepository(session).remove_created_before(time.time() - keep_seconds)
