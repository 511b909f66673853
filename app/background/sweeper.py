"""Periodic housekeeping of every replica: expired files and uploads, what projects' retention
periods ran out on, background responses past theirs, deleted-file and
deleted-batch records past their grace period, stale temp files and blobs no record points to."""

from __future__ import annotations

import asyncio
import logging
import time

from app.background.blob_reconcile import remove_orphan_blobs
from app.background.expiry import (
    sweep_expired_files,
    sweep_expired_results,
    sweep_idempotency_keys,
    sweep_uploads,
)
from app.background.retention import sweep_responses, sweep_retention
from app.background.tombstones import purge_batch_tombstones, purge_file_tombstones
from app.core.config import Settings
from app.db.engine import Database
from app.db.maintenance import reclaim_checkpoint_space
from app.storage import BlobStore

log = logging.getLogger("batchd")

# Temp files younger than this may belong to another server process sharing the data dir.
STALE_TEMP_SECONDS = 3600
RECONCILE_INTERVAL_SECONDS = 3600


async def sweep_forever(db: Database, store: BlobStore, settings: Settings) -> None:
    next_reconcile = 0.0
    while True:
        try:
            swept = await sweep_expired_files(db, store)
            await sweep_uploads(db, store)
            if await sweep_expired_results(db, store):
                log.info("swept the checkpoint chunks of batches whose results expired")
                await reclaim_checkpoint_space(db)
            if swept:
                log.info("swept %d expired files", swept)
            retained = await sweep_retention(db, store, settings)
            if retained:
                log.info("deleted %d files and batch results past their project's retention period", retained)
            responses = await sweep_responses(db, store, settings)
            if responses:
                log.info("deleted %d background responses past their retention period", responses)
            purged = await purge_file_tombstones(db, settings.tombstone_grace_seconds)
            if purged:
                log.info("purged %d deleted-file records past their grace period", purged)
            purged = await purge_batch_tombstones(db, settings.tombstone_grace_seconds)
            if purged:
                log.info("purged %d deleted-batch records past their grace period", purged)
            await sweep_idempotency_keys(db, settings.idempotency_key_hours * 3600)
            # Listing the whole store is not free: at start, then hourly.
            if time.monotonic() >= next_reconcile:
                await store.sweep_temp(older_than_seconds=STALE_TEMP_SECONDS)
                await remove_orphan_blobs(db, store, settings.orphan_blob_min_age)
                next_reconcile = time.monotonic() + RECONCILE_INTERVAL_SECONDS
        except Exception:
            log.exception("expired-file sweep failed; will retry")
        await asyncio.sleep(settings.sweep_interval)
