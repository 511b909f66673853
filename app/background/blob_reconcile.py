"""Orphan blobs: a blob can outlive its file row when the process dies between a delete's commit
and the blob's removal, or between an upload's blob commit and its row's commit. This pass
removes every blob that no live row (file, upload part, checkpoint chunk, a running batch's ordered
input and its positions) names, once it is old enough that no upload (of this or another replica)
can still be about to commit its row."""

from __future__ import annotations

import logging

from app.db.engine import Database
from app.db.repositories.batches import BatchRepository
from app.db.repositories.chunks import ChunkRepository
from app.db.repositories.files import FileRepository
from app.domains.files.uploads_repository import UploadRepository
from app.pipeline.input_order import positions_id
from app.storage.base import BlobStore

log = logging.getLogger("batchd.storage")


async def remove_orphan_blobs(db: Database, store: BlobStore, min_age_seconds: float) -> int:
    """Delete blobs older than `min_age_seconds` that belong to no live file; returns how many."""
    # Blobs first, rows second: a row committed after the listing is still seen, so a blob
    # that just got its row is never taken for an orphan.
    candidates = {name async for name in store.list_blobs(min_age_seconds)}
    if not candidates:
        return 0
    async with db.read() as session:
        async for project, file_id in FileRepository(session).live_ids():
            candidates.discard(store.blob_name(project, file_id))
        async for project, part_id in UploadRepository(session).part_ids():  # Uploads API parts
            candidates.discard(store.blob_name(project, part_id))
        async for project, blob_id in ChunkRepository(session).blob_ids():  # checkpoints in flight
            candidates.discard(store.blob_name(project, blob_id))
        async for project, blob_id in BatchRepository(session).ordered_inputs():  # shards' sources
            candidates.discard(store.blob_name(project, blob_id))
            candidates.discard(store.blob_name(project, positions_id(blob_id)))  # the copy's positions
    for name in candidates:
        await store.delete_named(name)
    if candidates:
        log.warning("removed %d orphan blobs (no live file row)", len(candidates))
    return len(candidates)
