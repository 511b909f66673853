"""Per-project retention (`batchd projects set NAME --retention-days N`, or `retention_days` on the
Administration API's project update): the sweeper deletes the project's files made more than N
days ago (uploads, batch inputs, batch output and error files alike) through the file service's
delete, as the project's own DELETE would, and the results of its batches that ended that long
ago; each deletion is an audit log entry (`resource.deleted`, no key as actor). A batch still
running keeps its input file until it ends.

Background responses have a retention period of their own (`background_response_retention_seconds`):
one that ended that long ago is deleted, with its request and result files, as
`DELETE /v1/responses/{id}` deletes it; one still queued or running is kept."""

from __future__ import annotations

import time

from app.core.config import Settings
from app.core.errors import Conflict, NotFound
from app.db.engine import Database
from app.db.models import File
from app.db.repositories.chunks import ChunkRepository
from app.db.repositories.files import FileRepository
from app.db.unit_of_work import run_hooks
from app.domains.batches.results import delete_results
from app.domains.files.service import FileService
from app.domains.organization.audit_log import record
from app.domains.organization.projects_repository import ProjectRepository
from app.domains.responses.repository import BackgroundResponseRepository
from app.domains.responses.service import BackgroundResponseService
from app.storage.base import BlobStore

DAY_SECONDS = 86_400
DELETED = "resource.deleted"


async def sweep_retention(db: Database, store: BlobStore, settings: Settings, batch_size: int = 200) -> int:
    """Delete what every project's retention period has run out on; returns how much went."""
    async with db.read() as session:
        periods = await ProjectRepository(session).retention()
    removed = 0
    for project, days in periods:
        cutoff = int(time.time()) - days * DAY_SECONDS
        removed += await _sweep_files(db, store, settings, project, days, cutoff, batch_size)
        removed += await _sweep_results(db, store, project, days, cutoff, batch_size)
    return removed


def _why(days: int) -> dict:
    return {"reason": "retention", "retention_days": days}


async def _sweep_files(
    db: Database, store: BlobStore, settings: Settings, project: str, days: int, cutoff: int, batch_size: int
) -> int:
    removed = 0
    while True:
        async with db.write() as session:
            files = await FileRepository(session).made_before(project, cutoff, batch_size)
            service = FileService(session, store, settings)
            for file in files:
                try:
                    await service.delete(project, file.id)
                except Conflict:  # a batch began using it meanwhile: it stays until that one ends
                    continue
                await record(session, None, DELETED, file.id, project, {"data": _file_details(file, days)})
                removed += 1
        await run_hooks(session, "after_commit")  # the blobs, once the rows are gone
        if len(files) < batch_size:
            return removed


def _file_details(file: File, days: int) -> dict:
    return {"object": "file", "purpose": file.purpose, "bytes": file.bytes, "created_at": file.created_at, **_why(days)}


async def _sweep_results(db: Database, store: BlobStore, project: str, days: int, cutoff: int, batch_size: int) -> int:
    removed = 0
    while True:
        async with db.write() as session:
            batch_ids = await ChunkRepository(session).batches_ended_before(project, cutoff, batch_size)
            for batch_id in batch_ids:
                await delete_results(session, store, project, batch_id)
                await record(
                    session, None, DELETED, batch_id, project, {"data": {"object": "batch.results", **_why(days)}}
                )
        await run_hooks(session, "after_commit")
        removed += len(batch_ids)
        if len(batch_ids) < batch_size:
            return removed


async def sweep_responses(db: Database, store: BlobStore, settings: Settings, batch_size: int = 200) -> int:
    """Delete the background responses that ended more than their retention period ago; how many."""
    cutoff = int(time.time()) - settings.background_response_retention_seconds
    removed = 0
    while True:
        async with db.write() as session:
            ended = await BackgroundResponseRepository(session).ended_before(cutoff, batch_size)
            service = BackgroundResponseService(session, store, settings)
            for project, response_id in ended:
                try:
                    await service.delete(project, response_id)
                except NotFound:  # its project's own DELETE got there first
                    continue
                details = {"object": "response", "reason": "retention"}
                await record(session, None, DELETED, response_id, project, {"data": details})
        await run_hooks(session, "after_commit")  # the blobs, once the rows are gone
        removed += len(ended)
        if len(ended) < batch_size:
            return removed
