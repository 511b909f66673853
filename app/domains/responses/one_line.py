"""The short-deadline lane's one-line batches, a background response's and a flex request's: the
request written as the batch's one-line input file, its result read back from the output (or
error) file, and the batch deleted with its files once it is done with."""

from __future__ import annotations

import time
from collections.abc import Awaitable, Callable
from typing import Any

from sqlalchemy.ext.asyncio import AsyncSession

from app.core import jsonbody
from app.core.batch_kinds import BatchKind
from app.core.config import Settings
from app.core.errors import InvalidRequest
from app.db.models import Batch, new_batch
from app.db.repositories.batches import BatchRepository
from app.db.repositories.files import FileRepository
from app.db.unit_of_work import after_commit
from app.domains.batches.results import delete_results
from app.domains.files.service import write_new_file
from app.pipeline.jsonl import split_lines
from app.pipeline.lines import ResultLine
from app.storage.base import BlobStore, BlobWriter


def request_object(raw_body: bytes) -> dict[str, Any]:
    """The request body, a JSON object (a 400 otherwise)."""
    try:
        request = jsonbody.loads(raw_body)
    except ValueError:
        raise InvalidRequest("The request body is not valid JSON.") from None
    if not isinstance(request, dict):
        raise InvalidRequest("The request body must be a JSON object.")
    return request


async def queue_one_line(
    session: AsyncSession,
    store: BlobStore,
    settings: Settings,
    repo: BatchRepository,
    *,
    batch_id: str,
    kind: BatchKind,
    project: str,
    endpoint: str,
    body: dict[str, Any],
    api_key_id: str | None,
) -> Batch:
    """Write `body` as the one line of a new batch's input file and add the batch, `validating`:
    due (`due_at`, which orders its work) `background_response_deadline_seconds` from now, with a
    hard expiry of `background_response_expiry_seconds`."""
    line = {"custom_id": batch_id, "method": "POST", "url": endpoint, "body": body}

    async def write(writer: BlobWriter) -> None:
        writer.write(jsonbody.dumps(line).encode() + b"\n")
        await writer.drain()

    file = await write_new_file(session, store, project, write, filename=f"{batch_id}_request.jsonl")
    await FileRepository(session).add(file)
    now = int(time.time())
    deadline = settings.background_response_deadline_seconds
    batch = new_batch(
        kind,
        batch_id=batch_id,
        project=project,
        endpoint=endpoint,
        input_file_id=file.id,
        completion_window=f"{deadline}s",
        created_at=now,
        due_at=now + deadline,  # orders its work (the lane); passing it ends nothing
        expires_at=now + max(settings.background_response_expiry_seconds, deadline),  # the hard expiry
        total=1,
        api_key_id=api_key_id,
    )
    await repo.add(batch)
    return batch


async def first_line(session: AsyncSession, store: BlobStore, project: str, file_id: str | None) -> Any:
    """The first line of a one-line file, parsed; None when the file is not there (none was
    written, or it was deleted)."""
    if file_id is None or await FileRepository(session).get(project, file_id) is None:
        return None
    async for _, raw in split_lines(store.read(project, file_id)):
        if raw.strip():
            return jsonbody.loads(raw)
    return None


async def result_of(session: AsyncSession, store: BlobStore, batch: Batch) -> ResultLine | None:
    """A completed one-line batch's result: its output line, or its error line."""
    for file_id in (batch.output_file_id, batch.error_file_id):
        line = await first_line(session, store, batch.project, file_id)
        if line is not None:
            return ResultLine.of(line)
    return None


async def delete_with_files(session: AsyncSession, store: BlobStore, repo: BatchRepository, batch: Batch) -> bool:
    """The batch becomes a tombstone, its request and result files are deleted (their blobs once
    the session commits) and its results dropped; False if another request deleted it first."""
    now = int(time.time())
    files = FileRepository(session)
    for file_id in filter(None, (batch.input_file_id, batch.output_file_id, batch.error_file_id)):
        file = await files.get(batch.project, file_id)
        if file is not None:
            await files.mark_deleted(file, now)
            after_commit(session, _blob_deleter(store, batch.project, file.id))
    if not await repo.mark_deleted(batch, now):
        return False
    await delete_results(session, store, batch.project, batch.id)
    return True


def _blob_deleter(store: BlobStore, project: str, file_id: str) -> Callable[[], Awaitable[None]]:
    return lambda: store.delete(project, file_id)
