"""Batches: create (parameter checks only; the file is validated asynchronously), read, list,
cancel. Execution belongs to the worker."""

from __future__ import annotations

import time
import uuid

from sqlalchemy.ext.asyncio import AsyncSession

from app.core.config import Settings
from app.core.endpoints import (
    CHAT_COMPLETIONS,
    COMPLETIONS,
    EMBEDDINGS,
    RERANK,
    RESPONSES,
    SCORE,
    TRANSCRIPTIONS,
    TRANSLATIONS,
    normalize_endpoint,
)
from app.core.errors import Conflict, InvalidRequest, MissingParameter, NotFound
from app.core.statuses import TERMINAL_BATCH_STATUSES, BatchStatus
from app.db.models import Batch
from app.db.repositories.base import Page, UnknownCursor
from app.db.repositories.batches import BatchRepository
from app.db.repositories.files import FileRepository
from app.schemas.batches import BatchCreateParams, BatchCreateRequest
from app.schemas.common import validated
from app.services.quotas import check_batch_create

BATCH_ENDPOINTS = (CHAT_COMPLETIONS, COMPLETIONS, EMBEDDINGS, SCORE, RERANK, RESPONSES, TRANSCRIPTIONS, TRANSLATIONS)
MAX_METADATA_PAIRS = 16
MAX_METADATA_KEY = 64
MAX_METADATA_VALUE = 512
MIN_OUTPUT_EXPIRY = 3600
MAX_OUTPUT_EXPIRY = 2_592_000


def new_batch_id() -> str:
    return f"batch_{uuid.uuid4().hex}"


class BatchService:
    def __init__(self, session: AsyncSession, settings: Settings) -> None:
        self.session = session
        self.repo = BatchRepository(session)
        self.files = FileRepository(session)
        self.settings = settings

    async def create(self, project: str, request: BatchCreateRequest) -> Batch:
        for name in ("input_file_id", "endpoint", "completion_window"):
            if getattr(request, name) in (None, ""):
                raise MissingParameter(name)
        endpoint = self._endpoint(request.endpoint)
        windows = self.settings.window_seconds()
        # isinstance first: an object or list is unhashable, and `in` would raise (a 500)
        if not isinstance(request.completion_window, str) or request.completion_window not in windows:
            raise InvalidRequest(
                f"Invalid value for 'completion_window': '{request.completion_window}'. Supported values are: "
                + ", ".join(f"'{w}'" for w in windows)
                + ".",
                param="completion_window",
                code="invalid_value",
            )
        metadata = self._metadata(request.metadata)
        output_expires_after = self._output_expires_after(request.output_expires_after)
        if not isinstance(request.input_file_id, str):
            raise InvalidRequest(
                "Invalid type for 'input_file_id': expected a string.", param="input_file_id", code="invalid_type"
            )
        validated(BatchCreateParams, request.model_dump())  # what /openapi.json states, all of it
        await check_batch_create(self.session, self.settings, project)
        now = int(time.time())
        input_file = await self.files.get(project, request.input_file_id)
        if input_file is None:
            raise NotFound(f"No such File object: {request.input_file_id}", param="input_file_id")
        if input_file.purpose != "batch":
            raise InvalidRequest(
                f"Invalid 'input_file_id': file {input_file.id} has purpose '{input_file.purpose}'; "
                "batch input files must be uploaded with purpose 'batch'.",
                param="input_file_id",
                code="invalid_value",
            )
        batch = Batch(
            id=new_batch_id(),
            project=project,
            endpoint=endpoint,
            input_file_id=input_file.id,
            completion_window=request.completion_window,
            status=BatchStatus.VALIDATING,
            metadata_=metadata,
            output_expires_after=output_expires_after,
            created_at=now,
            expires_at=now + windows[request.completion_window],
        )
        return await self.repo.add(batch)

    @staticmethod
    def _endpoint(value) -> str:
        endpoint = normalize_endpoint(value)
        if endpoint is None or endpoint not in BATCH_ENDPOINTS:
            raise InvalidRequest(
                f"Invalid value for 'endpoint': '{value}'. Supported values are: "
                + ", ".join(f"'{e}'" for e in BATCH_ENDPOINTS)
                + ".",
                param="endpoint",
                code="invalid_value",
            )
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
            or not (MIN_OUTPUT_EXPIRY <= seconds <= MAX_OUTPUT_EXPIRY)
        ):
            raise InvalidRequest(
                f"Invalid 'output_expires_after.seconds': expected an integer between {MIN_OUTPUT_EXPIRY} "
                f"and {MAX_OUTPUT_EXPIRY}, got {seconds!r}.",
                param="output_expires_after.seconds",
                code="invalid_value",
            )
        return seconds

    async def get(self, project: str, batch_id: str) -> Batch:
        batch = await self.repo.get(project, batch_id)
        if batch is None:
            raise NotFound(f"No such Batch object: {batch_id}", param="batch_id", code="batch_not_found")
        return batch

    async def list(self, project: str, *, limit: int, after: str | None) -> Page[Batch]:
        """Newest first."""
        try:
            return await self.repo.page(project, after=after, limit=limit)
        except UnknownCursor:
            raise NotFound(f"No such Batch object: {after}", param="after", code="batch_not_found") from None

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
