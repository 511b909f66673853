"""Files: upload (streamed to the blob store), read, list, delete, expiry."""

from __future__ import annotations

import asyncio
import time
import unicodedata
import uuid
from collections.abc import AsyncGenerator, AsyncIterator, Awaitable, Callable
from contextlib import aclosing
from pathlib import PurePosixPath
from urllib.parse import urlsplit, urlunsplit

import httpx
from sqlalchemy.ext.asyncio import AsyncSession

from app.core import metrics
from app.core.config import Settings
from app.core.errors import Conflict, Forbidden, InvalidRequest, InvalidValue, MissingParameter, PayloadTooLarge
from app.core.input_hygiene import check_text
from app.core.outbound import OutboundRefused, guarded_client
from app.core.purposes import UPLOAD_PURPOSES
from app.db.models import File
from app.db.repositories.base import Page, UnknownCursor
from app.db.repositories.batches import BatchRepository
from app.db.repositories.files import FileRepository
from app.db.unit_of_work import after_commit, on_rollback
from app.domains.files.upload_stream import receive_upload
from app.domains.limits.quotas import check_upload
from app.domains.lookup import FILE, get_or_404
from app.domains.organization.auth import Caller
from app.domains.organization.projects_repository import ProjectRepository
from app.schemas.common import MAX_EXPIRY_SECONDS, MIN_EXPIRY_SECONDS
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


def source_of(url: str) -> str:
    """What a file object shows of the URL it was imported from: no query string or fragment (a
    presigned URL's signature) and no user or password."""
    parts = urlsplit(url)
    host = parts.hostname or ""
    if ":" in host:
        host = f"[{host}]"
    netloc = host + (f":{parts.port}" if parts.port is not None else "")
    return urlunsplit((parts.scheme, netloc, parts.path, "", ""))


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
    source_url: str | None = None,
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
        source_url=source_url,
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


async def allowed_s3_prefixes(session: AsyncSession, settings: Settings, project: str) -> list[str]:
    """The `s3://bucket/prefix/` URIs the operator allows `project` to read from (a file import)
    and write to (a batch's `output_uri`): BATCHD_IMPORT_ALLOWED_URIS and the project's own."""
    row = await ProjectRepository(session).get(project)
    return [*settings.parsed_import_allowed_uris(), *((row.allowed_import_uris or []) if row else [])]


def uri_not_allowed(what: str, project: str, param: str) -> Forbidden:
    """The 403 for an `s3://` URI outside every prefix allowed to `project`."""
    return Forbidden(
        f"{what} is not allowed for this project: the operator allows S3 prefixes "
        f"with BATCHD_IMPORT_ALLOWED_URIS (every project) or `batchd projects set {project} "
        "--allow-uri s3://bucket/prefix/` (one project).",
        param=param,
        code="uri_not_allowed",
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

        return await self._stored(blob, file_id, project, filename, purpose, expires_after)

    async def import_url(self, project: str, fields: dict[str, object]) -> File:
        """Import a file by reference, streamed into the blob store with the same size cap and
        checks as an upload: `GET url` through the outbound policy for an http(s) URL; an
        `s3://bucket/key` read with the server's S3 credentials, under an allowed prefix only."""
        url = fields.get("url")
        if not isinstance(url, str) or not url:
            raise MissingParameter("url")
        purpose = fields.get("purpose")
        if not isinstance(purpose, str) or not purpose:
            raise MissingParameter("purpose")
        if purpose not in UPLOAD_PURPOSES:
            raise InvalidValue("purpose", purpose, UPLOAD_PURPOSES)
        limit = self._limit_for(purpose)
        if url.lower().startswith("s3://"):
            bucket, key = await self._allowed_s3_object(project, url)
            name, chunks = key, self._s3_chunks(bucket, key, limit, purpose)
        else:
            parsed = httpx.URL(url)
            if parsed.scheme not in ("http", "https"):
                raise InvalidRequest(
                    f"Unsupported URL scheme {parsed.scheme!r}: use http(s) or s3.", param="url", code="invalid_value"
                )
            name, chunks = parsed.path, self._http_chunks(url)
        filename = sanitize_filename(name.rsplit("/", 1)[-1] or "import.jsonl")
        if purpose == "batch" and not filename.lower().endswith(".jsonl"):
            raise InvalidRequest("Invalid file format for Batch API. Must be .jsonl")
        file_id = new_file_id()
        blob = self.store.new_writer(project, file_id)
        deadline = self.settings.import_timeout_seconds
        try:
            try:
                async with asyncio.timeout(deadline), aclosing(chunks):
                    async for chunk in chunks:
                        blob.write(chunk)
                        await blob.drain()
                        if blob.size > limit:
                            raise self._too_large(purpose)
                    await blob.drain()
            except TimeoutError:
                raise InvalidRequest(
                    f"The import did not finish within {deadline:g} seconds (BATCHD_IMPORT_TIMEOUT_SECONDS).",
                    param="url",
                    code="import_timeout",
                ) from None
            await check_upload(self.session, self.settings, project, blob.size)
        except BaseException:
            await blob.discard()
            raise
        return await self._stored(blob, file_id, project, filename, purpose, None, source_url=source_of(url))

    async def _stored(
        self,
        blob: BlobWriter,
        file_id: str,
        project: str,
        filename: str,
        purpose: str,
        expires_after: int | None,
        source_url: str | None = None,
    ) -> File:
        """The received bytes committed as the project's new file (an upload's or an import's)."""
        file = await commit_new_file(
            self.session,
            self.store,
            blob,
            file_id=file_id,
            project=project,
            filename=filename,
            purpose=purpose,
            expires_after=expires_after,
            source_url=source_url,
        )
        metrics.record_upload(blob.size)
        return await self.repo.add(file)

    async def _allowed_s3_object(self, project: str, url: str) -> tuple[str, str]:
        """(bucket, key) of an `s3://` URL under a prefix the operator allows this project:
        BATCHD_IMPORT_ALLOWED_URIS, or the project's own (`batchd projects set --allow-uri`)."""
        from app.storage.s3 import split_s3_uri, uri_allowed  # aiobotocore loads only when S3 is used

        try:
            bucket, key = split_s3_uri(url)
        except ValueError as exc:
            raise InvalidRequest(str(exc), param="url", code="invalid_value") from None
        if not key or key.endswith("/"):
            raise InvalidRequest(f"{url!r} names no object: use s3://bucket/key.", param="url", code="invalid_value")
        if not uri_allowed(url, await allowed_s3_prefixes(self.session, self.settings, project)):
            raise uri_not_allowed(f"Importing from {url!r}", project, "url")
        return bucket, key

    async def _s3_chunks(self, bucket: str, key: str, limit: int, purpose: str) -> AsyncGenerator[bytes, None]:
        from botocore.exceptions import BotoCoreError, ClientError

        from app.storage.s3 import import_client, read_object

        try:
            async with import_client(self.store, self.settings.s3_endpoint_url) as client:
                async for piece in read_object(client, bucket, key, limit):
                    yield piece
        except FileNotFoundError:
            raise InvalidRequest(f"No object at s3://{bucket}/{key}.", param="url", code="import_failed") from None
        except ValueError:
            raise self._too_large(purpose) from None
        except (BotoCoreError, ClientError) as exc:
            raise InvalidRequest(
                f"s3://{bucket}/{key} could not be read: {exc}", param="url", code="import_failed"
            ) from None

    async def _http_chunks(self, url: str) -> AsyncGenerator[bytes, None]:
        try:
            async with guarded_client(self.settings.outbound_policy(), timeout=60.0, follow_redirects=True) as client:
                async with client.stream("GET", url, headers={"accept-encoding": "identity"}) as response:
                    if response.status_code != 200:
                        raise InvalidRequest(
                            f"The URL answered HTTP {response.status_code}.", param="url", code="import_failed"
                        )
                    async for chunk in response.aiter_raw():
                        yield chunk
        except OutboundRefused as exc:
            raise InvalidRequest(str(exc), param="url", code="url_refused") from None
        except httpx.HTTPError as exc:
            raise InvalidRequest(f"The URL could not be fetched: {exc}", param="url", code="import_failed") from None

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
