"""Files: upload (streamed to the blob store), read, list, delete, expiry."""

from __future__ import annotations

import time
import unicodedata
import uuid
from collections.abc import AsyncIterator, Awaitable, Callable
from pathlib import PurePosixPath

from sqlalchemy.ext.asyncio import AsyncSession

from app.core import metrics
from app.core.config import Settings
from app.core.errors import Conflict, InvalidRequest, InvalidValue, MissingParameter, PayloadTooLarge
from app.core.input_hygiene import check_text
from app.core.purposes import UPLOAD_PURPOSES
from app.db.models import File
from app.db.repositories.base import Page, UnknownCursor
from app.db.repositories.batches import BatchRepository
from app.db.repositories.files import FileRepository
from app.schemas.common import MAX_EXPIRY_SECONDS, MIN_EXPIRY_SECONDS
from app.services.files.upload_stream import receive_upload
from app.services.limits.quotas import check_upload
from app.services.lookup import FILE, get_or_404
from app.services.organization.auth import Caller
from app.services.unit_of_work import after_commit, on_rollback
from app.storage.base import BlobStore, BlobWriter

# Room for multipart boundaries and form fields on top of the file itself.
MULTIPART_OVERHEAD_BYTES = 64 * 1024


def new_file_id() -> str:
    return f"file-{uuid.uuid4().hex}"


def sanitize_filename(raw: str | None) -> str:
    """The client filename is metadata only: basename, no control characters, ≤255 bytes."""
    name = PurePosixPath((raw or "").replace("\\", "/")).name
    name = "".join(ch for ch in name if unicodedata.category(ch)[0] != "C").strip()
    while len(name.encode()) > 255:
        name = name[:-1]
    return name or "upload"


async def commit_new_file(
    session: AsyncSession,
    store: BlobStore,
    writer: BlobWriter,
    *,
    file_id: str,
    project: str,
    filename: str,
    purpose: str,
    expires_after: int | None,
) -> File:
    """Commit the written bytes as file `file_id` and return its row, for the caller to add.
    Batch files expire after 30 days unless told otherwise; if the request's transaction does not
    commit, the blob must not outlive it."""
    now = int(time.time())
    if expires_after is None and purpose == "batch":
        expires_after = MAX_EXPIRY_SECONDS
    file = File(
        id=file_id,
        project=project,
        filename=filename,
        purpose=purpose,
        bytes=writer.size,
        created_at=now,
        expires_at=now + expires_after if expires_after else None,
        status="processed",
        sha256=writer.sha256,
    )
    await store.commit(writer, project, file_id)
    on_rollback(session, lambda: store.delete(project, file_id))
    return file


async def write_new_file(
    session: AsyncSession,
    store: BlobStore,
    project: str,
    write: Callable[[BlobWriter], Awaitable[None]],
    *,
    filename: str,
    purpose: str = "batch",
) -> File:
    """A new file of `project` holding what `write` puts in its writer (a batch's retry input, a
    Message Batch's request list): the blob is discarded when `write` raises, else committed as
    by commit_new_file. The caller adds the row."""
    file_id = new_file_id()
    writer = store.new_writer(project, file_id)
    try:
        await write(writer)
    except BaseException:
        await writer.discard()
        raise
    return await commit_new_file(
        session, store, writer, file_id=file_id, project=project, filename=filename, purpose=purpose, expires_after=None
    )


class FileService:
    def __init__(self, session: AsyncSession, store: BlobStore, settings: Settings) -> None:
        self.session = session
        self.repo = FileRepository(session)
        self.store = store
        self.settings = settings

    # -- upload -------------------------------------------------------------------------------

    def _limit_for(self, purpose: str | None) -> int:
        if purpose == "batch":
            return min(self.settings.max_batch_file_bytes, self.settings.max_file_bytes)
        return self.settings.max_file_bytes

    def _too_large(self, purpose: str | None) -> PayloadTooLarge:
        limit = self._limit_for(purpose)
        scope = "for purpose 'batch' " if purpose == "batch" else ""
        return PayloadTooLarge(
            f"File is too large: the maximum size {scope}is {limit} bytes.",
            param="file",
            code="file_too_large",
        )

    async def upload(
        self,
        project: str,
        body: AsyncIterator[bytes],
        content_type: str,
        content_length: int | None,
    ) -> File:
        if content_length is not None and content_length > self.settings.max_file_bytes + MULTIPART_OVERHEAD_BYTES:
            raise self._too_large(None)
        # The id comes first so the blob streams straight to its final place (an S3 key).
        file_id = new_file_id()
        received = await receive_upload(
            body, content_type, lambda: self.store.new_writer(project, file_id), self._limit_for, self._too_large
        )
        blob = received.blob
        try:
            purpose, expires_after = self._validate_form(received.fields, blob is not None)
            assert blob is not None, "the form was refused without its file part"
            check_text("file", received.filename or "")  # the part's filename (other control characters are dropped)
            filename = sanitize_filename(received.filename)
            if purpose == "batch" and not filename.lower().endswith(".jsonl"):
                raise InvalidRequest("Invalid file format for Batch API. Must be .jsonl")
            await check_upload(self.session, self.settings, project, blob.size)
        except BaseException:
            if blob is not None:
                await blob.discard()
            raise

        file = await commit_new_file(
            self.session,
            self.store,
            blob,
            file_id=file_id,
            project=project,
            filename=filename,
            purpose=purpose,
            expires_after=expires_after,
        )
        metrics.record_upload(blob.size)
        return await self.repo.add(file)

    def _validate_form(self, fields: dict[str, str], has_file: bool) -> tuple[str, int | None]:
        if not has_file:
            raise MissingParameter("file")
        purpose = fields.get("purpose")
        if not purpose:
            raise MissingParameter("purpose")
        if purpose not in UPLOAD_PURPOSES:
            raise InvalidValue("purpose", purpose, UPLOAD_PURPOSES)
        return purpose, self._expires_after(fields)

    @staticmethod
    def _expires_after(fields: dict[str, str]) -> int | None:
        anchor = fields.get("expires_after[anchor]")
        seconds = fields.get("expires_after[seconds]")
        if anchor is None and seconds is None:
            return None
        if anchor != "created_at":
            raise InvalidRequest(
                "Invalid value for 'expires_after.anchor': expected 'created_at'.",
                param="expires_after.anchor",
                code="invalid_value",
            )
        try:
            number = float(seconds or "")
            if not number.is_integer():  # 3600.0 is an integer to JSON Schema; 3600.5 is not
                raise ValueError(seconds)
            value = int(number)
        except (ValueError, OverflowError):
            raise InvalidRequest(
                "Invalid value for 'expires_after.seconds': expected an integer.",
                param="expires_after.seconds",
                code="invalid_type",
            ) from None
        if not MIN_EXPIRY_SECONDS <= value <= MAX_EXPIRY_SECONDS:
            raise InvalidRequest(
                f"Invalid 'expires_after.seconds': must be between {MIN_EXPIRY_SECONDS} and "
                f"{MAX_EXPIRY_SECONDS}, got {value}.",
                param="expires_after.seconds",
                code="invalid_value",
            )
        return value

    # -- read / list / delete -----------------------------------------------------------------

    async def get(self, project: str, file_id: str) -> File:
        return await get_or_404(self.repo, project, file_id, FILE)

    async def readable(self, caller: Caller, file_id: str) -> File:
        """The caller's project's file; for an admin key, any project's (an archived one's too)."""
        if caller.is_admin:
            file = await self.repo.get_in_any_project(file_id)
            if file is not None:
                return file
        return await self.get(caller.project, file_id)

    def content(self, file: File) -> AsyncIterator[bytes]:
        return self.store.read(file.project, file.id)

    async def list(
        self, project: str | None, *, purpose: str | None, limit: int, order: str, after: str | None
    ) -> Page[File]:
        try:
            return await self.repo.page(
                project,
                after=after,
                limit=limit,
                descending=order == "desc",
                where=[File.purpose == purpose] if purpose is not None else [],
            )
        except UnknownCursor:
            raise FILE.not_found(after, param="after") from None

    async def delete(self, project: str, file_id: str) -> File:
        file = await self.get(project, file_id)
        in_use_by = await BatchRepository(self.session).active_batch_using_file(project, file_id)
        if in_use_by is not None:
            raise Conflict(f"File {file_id} is the input of batch {in_use_by}, which is still running.", param="id")
        await self.repo.mark_deleted(file, int(time.time()))
        after_commit(self.session, lambda: self.store.delete(project, file_id))
        return file
