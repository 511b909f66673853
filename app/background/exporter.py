"""The exporter: copies ended batches' output and error files to their `output_uri` or
`output_urls` (results by reference, app/domains/batches/export.py), apart from finalize.

The state is the batch's row: `export_status` is `pending` from create until an attempt
succeeds (`completed`) or the last of BATCHD_EXPORT_MAX_ATTEMPTS fails (`failed`, with its
error); between attempts `export_next_at` says when the next is due (the delay doubles from
BATCHD_EXPORT_RETRY_BASE_SECONDS). So a restart picks up where it was.

Runs in every replica: an attempt is claimed by a conditional UPDATE (the attempt count as
read, and `export_next_at` moved past the attempt's deadline as a lease), so one replica makes
each attempt; a replica killed mid-attempt leaves the lease to run out, and the attempt counts."""

from __future__ import annotations

import asyncio
import logging
import time

from app.core.config import Settings
from app.core.statuses import ExportStatus
from app.db.engine import Database
from app.db.models import Batch
from app.db.repositories.batches import BatchRepository
from app.db.repositories.files import FileRepository
from app.domains.batches.export import ExportFailed, ExportFile, export_files
from app.storage.base import BlobStore

log = logging.getLogger("batchd.export")

CLAIM_BATCH = 8
# Exports one replica runs at once (each holds one part, or one PUT's stream).
MAX_IN_FLIGHT = 4
# The most an export waits between attempts.
MAX_DELAY_SECONDS = 3600.0
# How far past an attempt's deadline its lease runs (the record of its outcome fits in it).
LEASE_MARGIN_SECONDS = 30.0


def retry_delay(settings: Settings, attempts: int) -> float:
    """The wait after the `attempts`-th failed attempt."""
    return min(settings.export_retry_base_seconds * 2 ** (attempts - 1), MAX_DELAY_SECONDS)


class Exporter:
    def __init__(self, db: Database, store: BlobStore, settings: Settings) -> None:
        self.db = db
        self.store = store
        self.settings = settings
        self._running: set[asyncio.Task[None]] = set()

    async def run_forever(self) -> None:
        try:
            while True:
                try:
                    await self.export_due()
                except Exception:  # noqa: BLE001 - e.g. a busy database; try again next poll
                    log.warning("export round failed", exc_info=True)
                await asyncio.sleep(self.settings.export_poll_seconds)
        finally:
            for task in self._running:
                task.cancel()
            await asyncio.gather(*self._running, return_exceptions=True)

    async def export_due(self) -> int:
        """Start an attempt at each due export (as many as there is room for); how many."""
        free = MAX_IN_FLIGHT - len(self._running)
        if free <= 0:
            return 0
        now = time.time()
        async with self.db.read() as session:
            due = await BatchRepository(session).due_exports(now, min(free, CLAIM_BATCH))
        started = 0
        for batch in due:
            until = now + self.settings.export_timeout_seconds + LEASE_MARGIN_SECONDS
            async with self.db.write() as session:
                claimed = await BatchRepository(session).claim_export(batch.id, batch.export_attempts, now, until)
            if not claimed:  # another replica's
                continue
            task = asyncio.create_task(self._attempt(batch, batch.export_attempts + 1), name=f"export-{batch.id}")
            self._running.add(task)
            task.add_done_callback(self._ended)
            started += 1
        return started

    def _ended(self, task: asyncio.Task[None]) -> None:
        self._running.discard(task)
        if not task.cancelled() and task.exception() is not None:
            # E.g. a busy database when recording it: the lease runs out and the next attempt follows.
            log.warning("export attempt failed", exc_info=task.exception())

    async def _files(self, batch: Batch) -> list[ExportFile]:
        """The batch's output and error files that are still there."""
        files: list[ExportFile] = []
        async with self.db.read() as session:
            repo = FileRepository(session)
            for kind, file_id in (("output", batch.output_file_id), ("error", batch.error_file_id)):
                if file_id is None:
                    continue
                file = await repo.get(batch.project, file_id)
                if file is not None:
                    files.append(ExportFile(kind, file.id, file.bytes))
        return files

    async def _attempt(self, batch: Batch, attempt: int) -> None:
        error: dict | None = None
        try:
            await export_files(
                self.settings,
                self.store,
                batch.project,
                batch.id,
                await self._files(batch),
                output_uri=batch.output_uri,
                output_urls=batch.output_urls,
            )
        except ExportFailed as exc:
            error = exc.as_error()
        except Exception as exc:  # noqa: BLE001 - a blob the store cannot read, a bug: the attempt failed
            log.warning("export of batch %s failed", batch.id, exc_info=True)
            error = {"code": "export_failed", "message": f"{type(exc).__name__}: {exc}"}
        if error is None:
            status, next_at = ExportStatus.COMPLETED, None
        elif attempt >= self.settings.export_max_attempts:
            status, next_at = ExportStatus.FAILED, None
        else:
            status, next_at = ExportStatus.PENDING, time.time() + retry_delay(self.settings, attempt)
        async with self.db.write() as session:
            await BatchRepository(session).finish_export(batch.id, attempt, status=status, error=error, next_at=next_at)
        if error is not None:
            log.info("export of batch %s: attempt %d failed (%s): %s", batch.id, attempt, status, error["message"])
