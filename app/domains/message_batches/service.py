"""Anthropic Message Batches on batchd's batches: create (the request list is checked here and
written as a JSONL input file of `/v1/messages` lines, so validation, shards, leases, replicas,
webhooks and the dashboard run it as any batch), read, list, cancel, delete, results.

Each request's `params` are checked only as it runs: an unknown model or a missing
`max_tokens` ends that request `errored`, as Anthropic does.

Token limits: a Message Batch's prompt tokens count against its project's enqueued-token
limit per model, as an OpenAI batch's do (app/domains/limits/token_limits.py). Anthropic refuses a
batch over its queue limits with a 429 `rate_limit_error`; here the tokens are counted after
create (while validating), so a refused batch ends (`processing_status: ended`) with every
request `errored`, its error a `rate_limit_error` whose message names the model and the limit."""

from __future__ import annotations

import asyncio
import re
import time
import uuid
from collections.abc import AsyncIterator, Awaitable, Callable, Sequence
from datetime import UTC, datetime
from typing import Any

from pydantic import ValidationError
from sqlalchemy.ext.asyncio import AsyncSession

from app.core import jsonbody
from app.core.batch_kinds import ANTHROPIC_KIND
from app.core.config import Settings
from app.core.endpoints import MESSAGES
from app.core.errors import InvalidRequest, NotFound, invalid_request_from
from app.core.input_hygiene import check_json
from app.core.statuses import (
    TERMINAL_BATCH_STATUSES,
    BatchStatus,
    MessageBatchStatus,
    MessageResultType,
)
from app.db.models import Batch, new_batch
from app.db.repositories.base import Page, UnknownCursor
from app.db.repositories.files import FileRepository
from app.db.unit_of_work import after_commit
from app.domains.batches.results import delete_results
from app.domains.batches.service import BatchService
from app.domains.files.service import write_new_file
from app.domains.limits.quotas import check_batch_create
from app.domains.limits.token_limits import TOKEN_LIMIT_EXCEEDED
from app.domains.lookup import MESSAGE_BATCH, get_or_404
from app.domains.message_batches import body as message_batch_body
from app.domains.message_batches.body import REQUESTS
from app.domains.message_batches.repository import MessageBatchRepository
from app.domains.message_batches.results import converted_lines, errored, same_result_lines
from app.domains.message_batches.schemas import (
    MessageBatch,
    MessageBatchCreateParams,
    MessageBatchRequest,
    MessageBatchRequestCounts,
)
from app.schemas.common import validated
from app.storage.base import BlobStore, BlobWriter

# Anthropic processes a Message Batch within 24 hours, or its unfinished requests expire.
EXPIRY_SECONDS = 24 * 3600
COMPLETION_WINDOW = "24h"
CUSTOM_ID = re.compile(r"^[a-zA-Z0-9_-]{1,64}$")
# The input file is written in pieces of about this size, each encoded in a thread.
INPUT_CHUNK_BYTES = 4 * 1024 * 1024
_STATUS: dict[BatchStatus, MessageBatchStatus] = {
    BatchStatus.CANCELLING: MessageBatchStatus.CANCELING,
    **{status: MessageBatchStatus.ENDED for status in TERMINAL_BATCH_STATUSES},
}


def _validated_request(index: int, request: dict[str, Any]) -> None:
    """The body model's check of one request, its errors where the whole body's would put them."""
    try:
        MessageBatchRequest.model_validate(request)
    except ValidationError as exc:
        raise invalid_request_from([{**e, "loc": (REQUESTS, index, *e["loc"])} for e in exc.errors()]) from None


def _input_lines(requests: list[dict[str, Any]], start: int) -> tuple[bytes, int]:
    """The input file's lines of `requests[start:]`, about INPUT_CHUNK_BYTES of them (run in a
    thread), and the index after the last."""
    lines, size, end = [], 0, start
    while end < len(requests) and size < INPUT_CHUNK_BYTES:
        request = requests[end]
        line = {"custom_id": request["custom_id"], "method": "POST", "url": MESSAGES, "body": request["params"]}
        lines.append(jsonbody.dumps(line).encode() + b"\n")
        size += len(lines[-1])
        end += 1
    return b"".join(lines), end


def new_message_batch_id() -> str:
    return f"msgbatch_{uuid.uuid4().hex}"


def rfc3339(timestamp: int | None) -> str | None:
    if timestamp is None:
        return None
    return datetime.fromtimestamp(timestamp, UTC).isoformat().replace("+00:00", "Z")


def request_counts(batch: Batch) -> MessageBatchRequestCounts:
    """Live while it runs (finished requests move out of `processing` as they finish); once
    ended, requests that never ran are `canceled` or `expired` by how the batch ended."""
    if batch.status not in TERMINAL_BATCH_STATUSES:
        done = batch.completed + batch.failed
        return MessageBatchRequestCounts(
            processing=max(batch.total - done, 0),
            succeeded=batch.completed,
            errored=batch.failed,
            canceled=0,
            expired=0,
        )
    if batch.status == BatchStatus.FAILED:  # refused as a whole: no request ran
        return MessageBatchRequestCounts(processing=0, succeeded=0, errored=batch.total, canceled=0, expired=0)
    # Requests that never ran (the batch may have ended before it was validated).
    errored = batch.failed - batch.unexecuted
    not_run = max(batch.total - batch.completed - errored, 0)
    return MessageBatchRequestCounts(
        processing=0,
        succeeded=batch.completed,
        errored=errored + (not_run if batch.status == BatchStatus.COMPLETED else 0),
        canceled=not_run if batch.status == BatchStatus.CANCELLED else 0,
        expired=not_run if batch.status == BatchStatus.EXPIRED else 0,
    )


def _refusal_status(batch: Batch) -> int:
    """The HTTP status a refused batch's requests report: 429 (`rate_limit_error`, what Anthropic
    answers a batch its queue limits cannot take) when the enqueued-token limit refused it, else 400."""
    if any(e.get("code") == TOKEN_LIMIT_EXCEEDED for e in batch.errors or []):
        return 429
    return 400


def to_message_batch(batch: Batch, base_url: str) -> MessageBatch:
    """The wire object; `base_url` (the server's, without a trailing slash) makes `results_url`."""
    status = _STATUS.get(batch.status, MessageBatchStatus.IN_PROGRESS)
    ended_at = batch.completed_at or batch.cancelled_at or batch.expired_at or batch.failed_at
    return MessageBatch(
        id=batch.id,
        processing_status=status,
        request_counts=request_counts(batch),
        created_at=rfc3339(batch.created_at) or "",
        expires_at=rfc3339(batch.expires_at) or "",
        ended_at=rfc3339(ended_at) if status == MessageBatchStatus.ENDED else None,
        cancel_initiated_at=rfc3339(batch.cancelling_at),
        archived_at=None,
        results_url=f"{base_url}/v1/messages/batches/{batch.id}/results"
        if status == MessageBatchStatus.ENDED
        else None,
        paused_at=rfc3339(batch.paused_at) if batch.status == BatchStatus.IN_PROGRESS else None,
    )


class MessageBatchService:
    def __init__(self, session: AsyncSession, store: BlobStore, settings: Settings) -> None:
        self.session = session
        self.store = store
        self.settings = settings
        self.repo = MessageBatchRepository(session)

    async def create(self, project: str, raw_body: Sequence[bytes], *, api_key_id: str | None = None) -> Batch:
        """Check the request list (nothing is stored when it is refused), write it as the
        batch's input file and queue the batch. `raw_body` is the body's chunks as they came:
        joined, a big body would be one long copy on the event loop."""
        # Off the event loop (up to 256 MiB of JSON): see body.py for why a thread alone is not enough.
        requests = await asyncio.to_thread(self._requests, raw_body)
        await check_batch_create(self.session, self.settings, project)
        batch_id = new_message_batch_id()

        async def write(writer: BlobWriter) -> None:
            done = 0
            while done < len(requests):
                chunk, done = await asyncio.to_thread(_input_lines, requests, done)
                writer.write(chunk)
                await writer.drain()

        file = await write_new_file(self.session, self.store, project, write, filename=f"{batch_id}_requests.jsonl")
        await FileRepository(self.session).add(file)
        now = int(time.time())
        batch = new_batch(
            ANTHROPIC_KIND,
            batch_id=batch_id,
            project=project,
            endpoint=MESSAGES,
            input_file_id=file.id,
            completion_window=COMPLETION_WINDOW,
            created_at=now,
            expires_at=now + EXPIRY_SECONDS,
            total=len(requests),
            api_key_id=api_key_id,
        )
        return await self.repo.add(batch)

    def _requests(self, raw_body: Sequence[bytes]) -> list[dict[str, Any]]:
        """The checked request list (run in a thread: it parses and walks the whole body)."""
        try:
            parsed = message_batch_body.loads(raw_body)
        except ValueError:
            raise InvalidRequest("The request body is not valid JSON.") from None
        body = parsed.value
        # The check the other routes' bodies get before their route (app/api/deps.py), here
        # where it is off the event loop.
        if parsed.may_be_unclean:
            check_json(body)
        requests = body.get("requests") if isinstance(body, dict) else None
        if not isinstance(requests, list):
            raise InvalidRequest("requests: Field required (a list of {custom_id, params}).", param="requests")
        if not requests:
            raise InvalidRequest("requests: List should have at least 1 item.", param="requests")
        limit = self.settings.max_message_batch_requests
        if len(requests) > limit:
            raise InvalidRequest(
                f"requests: List should have at most {limit} items, not {len(requests)}.", param="requests"
            )
        seen: set[str] = set()
        for index, request in enumerate(requests):
            where = f"requests.{index}"
            if not isinstance(request, dict):
                raise InvalidRequest(f"{where}: Input should be an object.", param=where)
            custom_id, params = request.get("custom_id"), request.get("params")
            if not isinstance(custom_id, str) or not CUSTOM_ID.match(custom_id):
                raise InvalidRequest(
                    f"{where}.custom_id: String should match pattern '^[a-zA-Z0-9_-]{{1,64}}$'.",
                    param=f"{where}.custom_id",
                )
            if custom_id in seen:
                raise InvalidRequest(
                    f"Duplicate custom_id: '{custom_id}'. Each request in a batch must have a unique custom_id.",
                    param=f"{where}.custom_id",
                )
            seen.add(custom_id)
            if not isinstance(params, dict):
                raise InvalidRequest(f"{where}.params: Input should be an object.", param=f"{where}.params")
            _validated_request(index, request)
        # Request by request above: one validation of the whole list would hold the GIL throughout.
        validated(MessageBatchCreateParams, {**body, "requests": requests[:1]})
        return requests

    async def get(self, project: str, batch_id: str) -> Batch:
        return await get_or_404(self.repo, project, batch_id, MESSAGE_BATCH)

    async def list(self, project: str, *, limit: int, after_id: str | None, before_id: str | None) -> Page[Batch]:
        """Newest first; `after_id` pages to older batches, `before_id` to newer ones."""
        if after_id is not None and before_id is not None:
            raise InvalidRequest("Only one of before_id and after_id may be given.")
        try:
            if before_id is not None:
                return await self.repo.page_before(project, before=before_id, limit=limit)
            return await self.repo.page(project, after=after_id, limit=limit)
        except UnknownCursor as exc:
            raise MESSAGE_BATCH.not_found(exc.args[0], param="after_id" if before_id is None else "before_id") from None

    async def cancel(self, project: str, batch_id: str) -> Batch:
        """A batch that has ended is returned as it is (Anthropic's cancel does not refuse it)."""
        batch = await self.get(project, batch_id)
        if batch.status in TERMINAL_BATCH_STATUSES:
            return batch
        return await BatchService(self.session, self.settings).cancel(project, batch_id)

    async def pause(self, project: str, batch_id: str, *, paused: bool = True) -> Batch:
        """batchd's: pause (or resume) an `in_progress` batch, as an OpenAI batch's pause does."""
        batch = await self.get(project, batch_id)
        if batch.status != BatchStatus.IN_PROGRESS:
            verb = "pause" if paused else "resume"
            raise InvalidRequest(f"Cannot {verb} a batch that is not in progress.", code="batch_not_in_progress")
        await self.repo.set_paused(project, [batch_id], int(time.time()) if paused else None)
        await self.session.refresh(batch)
        return batch

    async def delete(self, project: str, batch_id: str) -> str:
        """Delete an ended batch with its input and result files. The batch becomes a tombstone,
        as a deleted OpenAI batch does: gone from retrieve and list, its id still a list cursor
        until tombstones are purged."""
        batch = await self.get(project, batch_id)
        if batch.status not in TERMINAL_BATCH_STATUSES:
            raise InvalidRequest(f"Message Batch {batch_id} cannot be deleted while it is processing; cancel it first.")
        files = FileRepository(self.session)
        now = int(time.time())
        for file_id in (batch.input_file_id, batch.output_file_id, batch.error_file_id):
            file = await files.get(project, file_id) if file_id else None
            if file is not None:
                await files.mark_deleted(file, now)
                after_commit(self.session, self._blob_deleter(project, file.id))
        if not await self.repo.mark_deleted(batch, now):
            raise MESSAGE_BATCH.not_found(batch_id)  # deleted by a request that got there first
        await delete_results(self.session, self.store, project, batch.id)
        return batch.id

    def _blob_deleter(self, project: str, file_id: str) -> Callable[[], Awaitable[None]]:
        return lambda: self.store.delete(project, file_id)

    async def results(self, project: str, batch_id: str) -> AsyncIterator[bytes]:
        """The result lines of an ended batch (succeeded first, then the others)."""
        batch = await self.get(project, batch_id)
        if batch.status not in TERMINAL_BATCH_STATUSES:
            raise InvalidRequest(f"Message Batch {batch_id} is still processing; its results are not ready.")
        # Checked before the first byte: once streaming, a missing file could only cut the answer short.
        sources = (
            (batch.input_file_id,) if batch.in_progress_at is None else (batch.output_file_id, batch.error_file_id)
        )
        files = FileRepository(self.session)
        for file_id in filter(None, sources):
            if await files.get(batch.project, file_id) is None:
                raise NotFound(
                    f"The results of Message Batch {batch_id} are no longer available: its file {file_id} was deleted."
                )
        return self._result_lines(batch)

    async def _result_lines(self, batch: Batch) -> AsyncIterator[bytes]:
        if batch.in_progress_at is None:  # ended before it ran: one result for every request
            if batch.status == BatchStatus.FAILED:
                message = "; ".join(e.get("message", "") for e in batch.errors or []) or "The batch could not run."
                result = errored(_refusal_status(batch), message)
            else:
                expired = batch.status == BatchStatus.EXPIRED
                result = {"type": MessageResultType.EXPIRED if expired else MessageResultType.CANCELED}
            async for line in same_result_lines(self.store.read(batch.project, batch.input_file_id), result):
                yield line
            return
        for file_id in (batch.output_file_id, batch.error_file_id):
            if file_id is not None:
                async for line in converted_lines(self.store.read(batch.project, file_id)):
                    yield line
