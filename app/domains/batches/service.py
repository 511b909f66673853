"""Batches: create (parameter checks only; the file is validated asynchronously), read, list,
cancel. Execution belongs to the worker."""

from __future__ import annotations

import time
import uuid
from dataclasses import dataclass

from sqlalchemy.ext.asyncio import AsyncSession

from app.core.batch_kinds import OPENAI_KIND
from app.core.config import Settings
from app.core.endpoints import normalize_endpoint
from app.core.errors import Conflict, InvalidRequest, InvalidValue
from app.core.statuses import TERMINAL_BATCH_STATUSES, BatchStatus, WebhookEndpointStatus
from app.core.webhook_signing import new_secret
from app.db.models import Batch, File, WebhookEndpoint, new_batch
from app.db.repositories.base import Page, UnknownCursor
from app.db.repositories.batches import BatchFilters, BatchRepository
from app.db.repositories.files import FileRepository
from app.domains.batches import export, retry
from app.domains.batches.results import delete_results
from app.domains.batches.schemas import (
    MAX_METADATA_PAIRS,
    WINDOWS,
    BatchCreateParams,
    BatchCreateRequest,
    BatchListQuery,
    BatchRetryParams,
    BatchRetryRequest,
    BatchWebhook,
    BatchWebhookParams,
)
from app.domains.files.service import FileService, write_new_file
from app.domains.limits.quotas import check_batch_create, check_upload
from app.domains.lookup import BATCH, FILE, get_or_404
from app.domains.organization.projects import check_completion_window
from app.domains.webhooks import urls as webhook_urls
from app.domains.webhooks.endpoints_repository import WebhookEndpointRepository
from app.domains.webhooks.service import new_endpoint_id
from app.schemas.common import validated
from app.storage.base import BlobStore, BlobWriter


@dataclass(frozen=True)
class CreateParams:
    """A create request's parameters, checked."""

    input_file_id: str
    endpoint: str
    completion_window: str
    window_seconds: int
    metadata: dict[str, str] | None
    output_expires_after: int | None
    allow_mixed_models: bool = False
    webhook: BatchWebhookParams | None = None
    output_order: str = "completion"
    output_uri: str | None = None
    output_urls: dict[str, str] | None = None


@dataclass(frozen=True)
class CheckedRequest:
    params: CreateParams
    input_file: File


def new_batch_id() -> str:
    return f"batch_{uuid.uuid4().hex}"


class BatchService:
    def __init__(self, session: AsyncSession, settings: Settings, store: BlobStore | None = None) -> None:
        self.session = session
        self.repo = BatchRepository(session)
        self.files = FileRepository(session)
        self.settings = settings
        self.store = store  # for deleting a batch with its files, and a retry's input file
        # The endpoint `create` registered for the batch's `webhook`, for the response (its secret).
        self.webhook: BatchWebhook | None = None

    async def create(
        self,
        project: str,
        request: BatchCreateRequest,
        *,
        retry_of: str | None = None,
        api_key_id: str | None = None,
    ) -> Batch:
        params = await self._checked_params(project, request)
        # The URL checks resolve DNS: before the first query opens the (write) transaction.
        hook_url = await self._webhook_url(params.webhook.url) if params.webhook else None
        await self._check_destination(project, params)
        await check_batch_create(self.session, self.settings, project)
        now = int(time.time())
        input_file = await self._input_file(project, params.input_file_id)
        batch_id = new_batch_id()
        batch = new_batch(
            OPENAI_KIND,
            batch_id=batch_id,
            project=project,
            endpoint=params.endpoint,
            input_file_id=input_file.id,
            completion_window=params.completion_window,
            metadata=params.metadata,
            output_expires_after=params.output_expires_after,
            allow_mixed_models=params.allow_mixed_models,
            created_at=now,
            expires_at=now + params.window_seconds,
            retry_of=retry_of,
            api_key_id=api_key_id,
            output_order=params.output_order,
            output_uri=params.output_uri,
            output_urls=params.output_urls,
        )
        added = await self.repo.add(batch)
        if params.webhook is not None and hook_url is not None:
            endpoint = await WebhookEndpointRepository(self.session).add(
                WebhookEndpoint(
                    id=new_endpoint_id(),
                    project=project,
                    name=f"{batch_id} webhook",
                    url=hook_url,
                    event_types=list(dict.fromkeys(params.webhook.events)),
                    secret=new_secret(),
                    status=WebhookEndpointStatus.ENABLED,
                    created_at=now,
                    updated_at=now,
                    batch_id=batch_id,
                )
            )
            self.webhook = BatchWebhook(
                id=endpoint.id, url=endpoint.url, events=endpoint.event_types, secret=endpoint.secret
            )
        return added

    async def _webhook_url(self, url: str) -> str:
        """A batch webhook's URL, by the outbound rules of every webhook endpoint."""
        try:
            return await webhook_urls.check(url, self.settings.outbound_policy())
        except webhook_urls.UnsafeUrl as exc:
            raise InvalidRequest(f"Invalid 'webhook.url': {exc}", param="webhook.url", code="invalid_url") from None

    async def _check_destination(self, project: str, params: CreateParams) -> None:
        """The results' destination (results by reference), if any: an `output_uri` the project
        may write under (403), `output_urls` the outbound policy allows now (400)."""
        if params.output_urls:
            await export.check_put_urls(params.output_urls, self.settings.outbound_policy())
        if params.output_uri:
            await export.check_output_uri(self.session, self.settings, project, params.output_uri)

    async def checked(self, project: str, request: BatchCreateRequest) -> CheckedRequest:
        """Create's checks of `request`, with the same errors, but for the project's limit on
        active batches (an estimate holds none)."""
        params = await self._checked_params(project, request)
        await self._check_destination(project, params)
        return CheckedRequest(params, await self._input_file(project, params.input_file_id))

    async def _checked_params(self, project: str, request: BatchCreateRequest) -> CreateParams:
        windows = self.settings.window_seconds()
        params = validated(BatchCreateParams, request.model_dump(), {WINDOWS: windows})
        await check_completion_window(self.session, project, params.completion_window, windows)
        expiry = params.output_expires_after
        if params.output_uri is not None and params.output_urls is not None:
            raise InvalidRequest(
                "Give either 'output_uri' or 'output_urls', not both.", param="output_urls", code="invalid_value"
            )
        urls = params.output_urls
        return CreateParams(
            input_file_id=params.input_file_id,
            endpoint=params.endpoint,
            completion_window=params.completion_window,
            window_seconds=windows[params.completion_window],
            metadata=params.metadata,
            output_expires_after=None if expiry is None else expiry.seconds,
            allow_mixed_models=bool(params.allow_mixed_models),
            webhook=params.webhook,
            output_order=params.output_order or "completion",
            output_uri=export.normalized_prefix(params.output_uri) if params.output_uri else None,
            output_urls=urls.model_dump(exclude_none=True) if urls is not None else None,
        )

    async def _input_file(self, project: str, file_id: str) -> File:
        """The project's file `file_id`, which must be a batch input file."""
        input_file = await self.files.get(project, file_id)
        if input_file is None:
            raise FILE.not_found(file_id, param="input_file_id")
        if input_file.purpose != "batch":
            raise InvalidRequest(
                f"Invalid 'input_file_id': file {input_file.id} has purpose '{input_file.purpose}'; "
                "batch input files must be uploaded with purpose 'batch'.",
                param="input_file_id",
                code="invalid_value",
            )
        return input_file

    async def get(self, project: str, batch_id: str) -> Batch:
        return await get_or_404(self.repo, project, batch_id, BATCH)

    async def list(
        self, project: str | None, *, limit: int, after: str | None, query: BatchListQuery | None = None
    ) -> Page[Batch]:
        """Newest first, narrowed by batchd's list filters (beside OpenAI's `after` and `limit`)."""
        filters = self._filters(query or BatchListQuery())
        try:
            return await self.repo.page_filtered(project, filters, after=after, limit=limit)
        except UnknownCursor:
            raise BATCH.not_found(after, param="after") from None

    @staticmethod
    def _filters(query: BatchListQuery) -> BatchFilters:
        statuses: list[BatchStatus] = []
        for given in query.status:
            for value in given.split(","):  # `status=a&status=b` and `status=a,b` alike
                if value not in BatchStatus.__members__.values():
                    raise InvalidValue("status", value, list(BatchStatus))
                statuses.append(BatchStatus(value))
        if query.metadata_without_key or any(not key for key, _ in query.metadata):
            raise InvalidRequest(
                "Invalid 'metadata': filter by metadata as metadata[key]=value.", param="metadata", code="invalid_value"
            )
        if len(query.metadata) > MAX_METADATA_PAIRS:
            raise InvalidRequest(
                f"Invalid 'metadata': at most {MAX_METADATA_PAIRS} metadata filters, got {len(query.metadata)}.",
                param="metadata",
                code="object_above_max_properties",
            )
        endpoint = query.endpoint if query.endpoint is None else normalize_endpoint(query.endpoint) or query.endpoint
        return BatchFilters(
            statuses=tuple(statuses),
            metadata=tuple(query.metadata),
            created_after=query.created_after,
            created_before=query.created_before,
            endpoint=endpoint,
            model=query.model,
        )

    async def delete(self, project: str, batch_id: str, *, with_files: bool = False) -> str:
        """Delete an ended batch (batchd's, beside OpenAI's contract). Its input, output and
        error files stay unless `with_files`: then each still there goes as `DELETE
        /v1/files/{id}` takes it (refused, and nothing deleted, while another running batch
        reads the input file). Its usage stays booked (usage_minutes is not tied to the row)."""
        batch = await self.get(project, batch_id)
        if batch.status not in TERMINAL_BATCH_STATUSES:
            raise Conflict(
                f"Cannot delete a batch with status '{batch.status}': it has not ended. Cancel it first, "
                "or wait until it ends."
            )
        if with_files:
            assert self.store is not None, "the API's BatchService has the blob store"
            files = FileService(self.session, self.store, self.settings)
            file_ids = dict.fromkeys(filter(None, (batch.input_file_id, batch.output_file_id, batch.error_file_id)))
            for file_id in file_ids:
                if await self.files.get(project, file_id) is not None:  # one already deleted or expired stays so
                    await files.delete(project, file_id)
        if not await self.repo.mark_deleted(batch, int(time.time())):
            raise BATCH.not_found(batch_id)  # deleted by a request that got there first
        assert self.store is not None, "the API's BatchService has the blob store"
        await delete_results(self.session, self.store, project, batch.id)  # kept for GET .../results
        return batch.id

    async def retry(
        self, project: str, batch_id: str, request: BatchRetryRequest, *, api_key_id: str | None = None
    ) -> Batch:
        """A new batch of the ended batch's lines that did not succeed (only those whose error code
        is in `errors`, if given), as a new input file written here; same endpoint, window,
        metadata and output expiry, `retry_of` naming the original (batchd's, beside OpenAI's API)."""
        batch = await self.get(project, batch_id)
        if batch.status not in TERMINAL_BATCH_STATUSES:
            raise Conflict(f"Cannot retry a batch with status '{batch.status}': it has not ended.")
        codes = validated(BatchRetryParams, request.model_dump()).errors
        for file_id, what in ((batch.input_file_id, "input"), (batch.error_file_id, "error")):
            if file_id is not None and await self.files.get(project, file_id) is None:
                raise InvalidRequest(
                    f"Cannot retry batch {batch_id}: its {what} file {file_id} was deleted.", code="file_deleted"
                )
        assert self.store is not None, "the API's BatchService has the blob store"
        custom_ids: set[str] | None = None  # None: every line
        if batch.in_progress_at is None:  # it never ran: each line has the batch's own codes
            if codes is not None and not set(codes) & retry.never_ran_codes(batch):
                raise self._nothing_to_retry(batch_id)
        elif batch.error_file_id is None:  # every line succeeded
            raise self._nothing_to_retry(batch_id)
        else:
            custom_ids = await retry.failed_custom_ids(self.store, project, batch.error_file_id, codes)
        store = self.store

        async def write(writer: BlobWriter) -> None:
            if await retry.copy_lines(store, project, batch.input_file_id, writer, custom_ids) == 0:
                raise self._nothing_to_retry(batch_id)
            await check_upload(self.session, self.settings, project, writer.size)  # it is a file like any

        file = await write_new_file(self.session, store, project, write, filename=f"{batch.id}_retry.jsonl")
        await self.files.add(file)
        expiry = batch.output_expires_after
        again = BatchCreateRequest(
            input_file_id=file.id,
            endpoint=batch.endpoint,
            completion_window=batch.completion_window,
            metadata=batch.metadata_,
            output_expires_after={"anchor": "created_at", "seconds": expiry} if expiry is not None else None,
            allow_mixed_models=batch.allow_mixed_models or None,
        )
        return await self.create(project, again, retry_of=batch.id, api_key_id=api_key_id)

    @staticmethod
    def _nothing_to_retry(batch_id: str) -> InvalidRequest:
        return InvalidRequest(f"Batch {batch_id} has no lines to retry.", code="nothing_to_retry")

    async def pause(self, project: str, batch_id: str, *, paused: bool = True) -> Batch:
        """Pause (or resume) a running batch: no line of it starts while paused; lines in flight
        finish. Pausing a paused batch or resuming a running one returns it as it is."""
        batch = await self.get(project, batch_id)
        if batch.status != BatchStatus.IN_PROGRESS:
            verb = "pause" if paused else "resume"
            raise InvalidRequest(f"Cannot {verb} a batch with status '{batch.status}'.", code="batch_not_in_progress")
        await self.repo.set_paused(project, [batch_id], int(time.time()) if paused else None)
        await self.session.refresh(batch)
        return batch

    async def has_batches(self, project: str) -> bool:
        return await self.repo.any_of_project(project)

    async def pause_project(self, project: str, *, paused: bool = True) -> int:
        """Pause (or resume) every running batch of a project; how many changed."""
        return await self.repo.set_paused(project, None, int(time.time()) if paused else None)

    async def cancel(self, project: str, batch_id: str) -> Batch:
        batch = await self.get(project, batch_id)
        if batch.status in TERMINAL_BATCH_STATUSES:
            raise Conflict(f"Cannot cancel a batch with status '{batch.status}'.")
        if batch.status != BatchStatus.CANCELLING:
            await self.repo.request_cancel(project, batch_id, int(time.time()))
        await self.session.refresh(batch)
        if batch.status in TERMINAL_BATCH_STATUSES:  # finished while we looked
            raise Conflict(f"Cannot cancel a batch with status '{batch.status}'.")
        return batch
