"""Periodic housekeeping of every replica: expired files and uploads, what projects' retention
periods ran out on, background responses past theirs, deleted-file and
deleted-batch records past their grace period, stale temp files and blobs no record points to."""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Awaitable, Callable

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
from app.domains.webhooks.endpoints_repository import WebhookEndpointRepository
from app.storage import BlobStore

log = logging.getLogger("batchd")

# Temp files younger than this may belong to another server process sharing the data dir.
STALE_TEMP_SECONDS = 3600
RECONCILE_INTERVAL_SECONDS = 3600


async def _expired_files(db: Database, store: BlobStore, settings: Settings) -> None:
    swept = await sweep_expired_files(db, store)
    if swept:
        log.info("swept %d expired files", swept)


async def _uploads(db: Database, store: BlobStore, settings: Settings) -> None:
    await sweep_uploads(db, store)


async def _expired_results(db: Database, store: BlobStore, settings: Settings) -> None:
    if await sweep_expired_results(db, store):
        log.info("swept the checkpoint chunks of batches whose results expired")
        await reclaim_checkpoint_space(db)


async def _retention(db: Database, store: BlobStore, settings: Settings) -> None:
    retained = await sweep_retention(db, store, settings)
    if retained:
        log.info("deleted %d files and batch results past their project's retention period", retained)


async def _responses(db: Database, store: BlobStore, settings: Settings) -> None:
    responses = await sweep_responses(db, store, settings)
    if responses:
        log.info("deleted %d background responses past their retention period", responses)


async def _tombstones(db: Database, store: BlobStore, settings: Settings) -> None:
    purged = await purge_file_tombstones(db, settings.tombstone_grace_seconds)
    if purged:
        log.info("purged %d deleted-file records past their grace period", purged)
    purged = await purge_batch_tombstones(db, settings.tombstone_grace_seconds)
    if purged:
        log.info("purged %d deleted-batch records past their grace period", purged)


async def _idempotency_keys(db: Database, store: BlobStore, settings: Settings) -> None:
    await sweep_idempotency_keys(db, settings.idempotency_key_hours * 3600)


async def _batch_webhooks(db: Database, store: BlobStore, settings: Settings) -> None:
    """A batch's own webhook endpoint whose event can no longer be sent (its retries over, say
    while the endpoint was disabled), or whose batch is gone, is removed."""
    async with db.write() as session:
        endpoints = WebhookEndpointRepository(session)
        stale = await endpoints.stale_batch_bound(int(time.time() - settings.webhook_retry_horizon_seconds))
        for endpoint_id in stale:
            await endpoints.remove_batch_bound(endpoint_id)
    if stale:
        log.info("sweep: removed %d batch webhook endpoints with nothing more to send", len(stale))


async def _temp_files(db: Database, store: BlobStore, settings: Settings) -> None:
    await store.sweep_temp(older_than_seconds=STALE_TEMP_SECONDS)


async def _orphan_blobs(db: Database, store: BlobStore, settings: Settings) -> None:
    await remove_orphan_blobs(db, store, settings.orphan_blob_min_age)


SweepStep = Callable[[Database, BlobStore, Settings], Awaitable[None]]
# Every sweep, in this order; each on its own, so one that fails (a file's blob the store refuses
# to delete, a bug) does not keep the others from running: retention, tombstones and
# idempotency keys are promises to tenants, due whatever else fails.
STEPS: list[tuple[str, SweepStep]] = [
    ("expired files", _expired_files),
    ("expired uploads", _uploads),
    ("expired results", _expired_results),
    ("retention", _retention),
    ("background responses", _responses),
    ("tombstones", _tombstones),
    ("idempotency keys", _idempotency_keys),
    ("batch webhooks", _batch_webhooks),
]
# Listing the whole store is not free: at start, then hourly.
HOURLY_STEPS: list[tuple[str, SweepStep]] = [("temp files", _temp_files), ("orphan blobs", _orphan_blobs)]


async def _run_steps(steps: list[tuple[str, SweepStep]], db: Database, store: BlobStore, settings: Settings) -> bool:
    """Run each step, whatever the others did; whether all of them succeeded."""
    ok = True
    for name, step in steps:
        try:
            await step(db, store, settings)
        except Exception:
            log.exception("the %s sweep failed; will retry", name)
            ok = False
    return ok


async def sweep_forever(db: Database, store: BlobStore, settings: Settings) -> None:
    next_reconcile = 0.0
    while True:
        await _run_steps(STEPS, db, store, settings)
        if time.monotonic() >= next_reconcile and await _run_steps(HOURLY_STEPS, db, store, settings):
            next_reconcile = time.monotonic() + RECONCILE_INTERVAL_SECONDS
        await asyncio.sleep(settings.sweep_interval)
