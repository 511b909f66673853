"""Batches: create (parameter checks only; the file is validated asynchronously), read, list,
cancel. Execution belongs to the worker."""

from __future__ import annotations

import time
import uuid
from dataclasses import dataclass

from sqlalchemy.ext.asyncio import AsyncSession

from app.core import tracing
from app.core.config import Settings
from app.core.endpoints import OPENAI_BATCH_ENDPOINTS, normalize_endpoint
from app.core.errors import Conflict, InvalidRequest, InvalidValue, MissingParameter
from app.core.statuses import TERMINAL_BATCH_STATUSES, BatchStatus
from app.db.models import Batch, File
from app.db.repositories.base import Page, UnknownCursor
from app.db.repositories.batches import BatchFilters, BatchRepository
from app.db.repositories.files import FileRepository
from app.schemas.batches import (
    BatchCreateParams,
    BatchCreateRequest,
    BatchListQuery,
    BatchRetryParams,
    BatchRetryRequest,
)
from app.schemas.common import MAX_EXPIRY_SECONDS, MIN_EXPIRY_SECONDS, validated
from app.services.batches import retry
from app.services.batches.results import delete_results
from app.services.files.files import FileService, write_new_file
from app.services.limits.quotas import check_batch_create, check_upload
from app.services.lookup import BATCH, FILE, get_or_404
from app.services.organization.projects import check_completion_window
from app.storage.base import BlobStore, BlobWriter

MAX_METADATA_PAIRS = 16
MAX_METADATA_KEY = 64
MAX_METADATA_VALUE = 512


@dataclass(frozen=True)
class CreateParams:
    """A create request's parameters, checked."""

    input_file_id: str
    endpoint: str
    completion_window: str
    window_seconds: int
    metadata: dict[str, str] | None
    output_expires_after: int | None


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

    async def create(
        self,
        project: str,
        request: BatchCreateRequest,
        *,
        retry_of: str | None = None,
        api_key_id: str | None = None,
    ) -> Batch:
        params = await self._checked_params(project, request)
        await check_batch_create(self.session, self.settings, project)
        now = int(time.time())
        input_file = await self._input_file(project, params.input_file_id)
        batch_id = new_batch_id()
        batch = Batch(
            id=batch_id,
            project=project,
            endpoint=params.endpoint,
            input_file_id=input_file.id,
            completion_window=params.completion_window,
            status=BatchStatus.VALIDATING,
            metadata_=params.metadata,
            output_expires_after=params.output_expires_after,
            created_at=now,
            expires_at=now + params.window_seconds,
            retry_of=retry_of,
            traceparent=tracing.request_traceparent(batch_id=batch_id, project=project),
            api_key_id=api_key_id,
        )
        return await self.repo.add(batch)

    async def checked(self, project: str, request: BatchCreateRequest) -> CheckedRequest:
        """Create's checks of `request`, with the same errors, but for the project's limit on
        active batches (an estimate holds none)."""
        params = await self._checked_params(project, request)
        return CheckedRequest(params, await self._input_file(project, params.input_file_id))

    async def _checked_params(self, project: str, request: BatchCreateRequest) -> CreateParams:
        for name in ("input_file_id", "endpoint", "completion_window"):
            if getattr(request, name) in (None, ""):
                raise MissingParameter(name)
        endpoint = self._endpoint(request.endpoint)
        windows = self.settings.window_seconds()
        # isinstance first: an object or list is unhashable, and `in` would raise (a 500)
        if not isinstance(request.completion_window, str) or request.completion_window not in windows:
            raise InvalidValue("completion_window", request.completion_window, windows)
        await check_completion_window(self.session, project, request.completion_window, windows)
        metadata = self._metadata(request.metadata)
        output_expires_after = self._output_expires_after(request.output_expires_after)
        if not isinstance(request.input_file_id, str):
            raise InvalidRequest(
                "Invalid type for 'input_file_id': expected a string.", param="input_file_id", code="invalid_type"
            )
        validated(BatchCreateParams, request.model_dump())  # what /openapi.json states, all of it
        return CreateParams(
            input_file_id=request.input_file_id,
            endpoint=endpoint,
            completion_window=request.completion_window,
            window_seconds=windows[request.completion_window],
            metadata=metadata,
            output_expires_after=output_expires_after,
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

    @staticmethod
    def _endpoint(value) -> str:
        endpoint = normalize_endpoint(value)
        if endpoint is None or endpoint not in OPENAI_BATCH_ENDPOINTS:
            raise InvalidValue("endpoint", value, OPENAI_BATCH_ENDPOINTS)
        return endpoint

    @staticmethod
    def _metadata(metadata) -> dict[str, str] | None:
        if metadata is None:
            return None
        if not isinstance(metadata, dict):
            raise InvalidRequest(
                "Invalid type for 'metadata': expected an object.", param="metadata", code="invalid_type"
            )
        if len(metadata) > MAX_METADATA_PAIRS:
            raise InvalidRequest(
                f"Invalid 'metadata': too many properties. Expected an object with at most "
                f"{MAX_METADATA_PAIRS} properties, but got {len(metadata)} instead.",
                param="metadata",
                code="object_above_max_properties",
            )
        for key, value in metadata.items():
            if len(key) > MAX_METADATA_KEY:
                raise InvalidRequest(
                    f"Invalid 'metadata': key '{key[:20]}...' is longer than {MAX_METADATA_KEY} characters.",
                    param="metadata",
                    code="invalid_value",
                )
            if not isinstance(value, str):
                raise InvalidRequest(
                    f"Invalid type for 'metadata.{key}': expected a string.",
                    param=f"metadata.{key}",
                    code="invalid_type",
                )
            if len(value) > MAX_METADATA_VALUE:
                raise InvalidRequest(
                    f"Invalid 'metadata.{key}': string too long. Expected a string with maximum length "
                    f"{MAX_METADATA_VALUE}, but got a string with length {len(value)} instead.",
                    param=f"metadata.{key}",
                    code="string_above_max_length",
                )
        return metadata

    @staticmethod
    def _output_expires_after(value) -> int | None:
        if value is None:
            return None
        if not isinstance(value, dict) or value.get("anchor") != "created_at":
            raise InvalidRequest(
                "Invalid 'output_expires_after.anchor': expected 'created_at'.",
                param="output_expires_after.anchor",
                code="invalid_value",
            )
        seconds = value.get("seconds")
        if isinstance(seconds, float) and seconds.is_integer():
            seconds = int(seconds)  # 3600.0 is an integer to JSON Schema (and to OpenAI's parser)
        if (
            not isinstance(seconds, int)
            or isinstance(seconds, bool)
            or not (MIN_EXPIRY_SECONDS <= seconds <= MAX_EXPIRY_SECONDS)
        ):
            raise InvalidRequest(
                f"Invalid 'output_expires_after.seconds': expected an integer between {MIN_EXPIRY_SECONDS} "
                f"and {MAX_EXPIRY_SECONDS}, got {seconds!r}.",
                param="output_expires_after.seconds",
                code="invalid_value",
            )
        return seconds

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
        )
        return await self.create(project, again, retry_of=batch.id, api_key_id=api_key_id)

    @staticmethod
    def _nothing_to_retry(batch_id: str) -> InvalidRequest:
        return InvalidRequest(f"Batch {batch_id} has no lines to retry.", code="nothing_to_retry")

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
