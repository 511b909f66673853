"""Uploads (OpenAI Uploads API): a large file sent as parts, then completed into one File.

Each part streams straight into the blob store under its own server-made id; completion streams
the parts in order into the File's writer (the only pass of the bytes through this process,
hashed on the way for the optional md5) and removes the parts. Work that reads many bytes runs
outside the request's write transaction (SQLite has one writer); the final state change is a
guarded `UPDATE ... WHERE status = 'pending'`, so a racing complete, cancel or expiry loses cleanly.
"""

from __future__ import annotations

import hashlib
import logging
import time
import uuid
from collections.abc import AsyncIterator, Sequence

from sqlalchemy.ext.asyncio import AsyncSession

from app.core.config import Settings
from app.core.errors import Conflict, InvalidRequest, InvalidValue, MissingParameter, PayloadTooLarge
from app.core.purposes import UPLOAD_PURPOSES
from app.core.statuses import UploadStatus
from app.db.engine import Database
from app.db.models import File, Upload, UploadPart
from app.db.repositories.files import FileRepository
from app.db.unit_of_work import after_commit, on_rollback
from app.domains.files.service import MULTIPART_OVERHEAD_BYTES, commit_new_file, new_file_id, sanitize_filename
from app.domains.files.upload_stream import receive_upload
from app.domains.files.uploads_repository import UploadRepository
from app.domains.files.uploads_schemas import UploadCompleteRequest, UploadCreateParams, UploadCreateRequest
from app.domains.limits.quotas import check_upload
from app.domains.lookup import UPLOAD
from app.schemas.common import validated
from app.storage.base import BlobStore, BlobWriter

log = logging.getLogger("batchd.uploads")

PART_FIELD = "data"
# Parts removed per transaction by the cleanup.
CLEANUP_BATCH = 500


def _not_pending(upload_id: str, action: str, state: str) -> Conflict:
    """409, as OpenAI answers an action that the object's state forbids (cancelling a finished
    batch); told not to retry, since retrying cannot change the state."""
    return Conflict(
        f"Cannot {action} Upload {upload_id}: it is {state}.",
        param="upload_id",
        headers={"x-should-retry": "false"},
    )


def new_upload_id() -> str:
    return f"upload_{uuid.uuid4().hex}"


def new_part_id() -> str:
    return f"part_{uuid.uuid4().hex}"


class UploadService:
    def __init__(self, session: AsyncSession, store: BlobStore, settings: Settings, db: Database) -> None:
        self.session = session
        self.repo = UploadRepository(session)
        self.store = store
        self.settings = settings
        # Reads before long streaming work use their own short read session, so the request's
        # write transaction (SQLite's single writer) is not held while bytes move.
        self.db = db

    # -- create -------------------------------------------------------------------------------

    def _max_bytes(self, purpose: str) -> int:
        if purpose == "batch":
            return min(self.settings.max_batch_file_bytes, self.settings.max_upload_bytes)
        return self.settings.max_upload_bytes

    async def create(self, project: str, request: UploadCreateRequest | None) -> Upload:
        if request is None:
            raise MissingParameter("bytes")
        if request.purpose not in UPLOAD_PURPOSES:
            raise InvalidValue("purpose", request.purpose, UPLOAD_PURPOSES)
        limit = self._max_bytes(request.purpose)
        if request.bytes > limit:
            raise InvalidRequest(
                f"Invalid 'bytes': an upload with purpose '{request.purpose}' can be at most {limit} bytes, "
                f"got {request.bytes}.",
                param="bytes",
                code="invalid_value",
            )
        filename = sanitize_filename(request.filename)
        if request.purpose == "batch" and not filename.lower().endswith(".jsonl"):
            raise InvalidRequest("Invalid file format for Batch API. Must be .jsonl", param="filename")
        validated(UploadCreateParams, request.model_dump())  # what /openapi.json states, all of it
        await check_upload(self.session, self.settings, project, request.bytes)
        now = int(time.time())
        upload = Upload(
            id=new_upload_id(),
            project=project,
            filename=filename,
            purpose=request.purpose,
            mime_type=request.mime_type,
            bytes=request.bytes,
            status=UploadStatus.PENDING,
            created_at=now,
            expires_at=now + self.settings.upload_ttl_seconds,
            file_expires_after=request.expires_after.seconds if request.expires_after else None,
        )
        await self.repo.add(upload)
        return upload

    # -- parts --------------------------------------------------------------------------------

    @staticmethod
    def _require_pending(upload: Upload | None, upload_id: str, action: str) -> Upload:
        if upload is None:
            raise UPLOAD.not_found(upload_id)
        status = upload.status_at(time.time())
        if status != UploadStatus.PENDING:
            raise _not_pending(upload_id, action, status)
        return upload

    async def _read_pending(self, project: str, upload_id: str, action: str) -> Upload:
        async with self.db.read() as session:
            upload = await UploadRepository(session).get(project, upload_id)
        return self._require_pending(upload, upload_id, action)

    def _part_too_large(self, _purpose: str | None = None) -> PayloadTooLarge:
        return PayloadTooLarge(
            f"Part is too large: each part can be at most {self.settings.max_upload_part_bytes} bytes.",
            param=PART_FIELD,
            code="file_too_large",
        )

    async def add_part(
        self, project: str, upload_id: str, body: AsyncIterator[bytes], content_type: str, content_length: int | None
    ) -> UploadPart:
        # Checked before the body is read: a part for an unknown or finished upload costs nothing.
        await self._read_pending(project, upload_id, "add a Part to")
        part_limit = self.settings.max_upload_part_bytes
        if content_length is not None and content_length > part_limit + MULTIPART_OVERHEAD_BYTES:
            raise self._part_too_large()
        received = await receive_upload(
            body,
            content_type,
            self.store.new_writer,
            lambda _purpose: part_limit,
            self._part_too_large,
            file_field=PART_FIELD,
        )
        if received.blob is None:
            raise MissingParameter(PART_FIELD)
        part = UploadPart(
            id=new_part_id(),
            upload_id=upload_id,
            project=project,
            bytes=received.blob.size,
            created_at=int(time.time()),
        )
        await self.store.commit(received.blob, project, part.id)
        on_rollback(self.session, lambda: self.store.delete(project, part.id))
        # Re-checked under the row lock: the upload may have completed meanwhile.
        upload = self._require_pending(
            await self.repo.get(project, upload_id, for_update=True), upload_id, "add a Part to"
        )
        if await self.repo.parts_bytes(upload.id) + part.bytes > self.settings.max_upload_bytes:
            raise InvalidRequest(
                f"Upload {upload_id} cannot take more than {self.settings.max_upload_bytes} bytes of parts.",
                param=PART_FIELD,
            )
        await self.repo.add_part(part)
        return part

    # -- complete / cancel --------------------------------------------------------------------

    async def _ordered_parts(self, upload: Upload, part_ids: Sequence[str]) -> list[UploadPart]:
        if len(set(part_ids)) != len(part_ids):
            raise InvalidRequest("Each Part may be listed only once in 'part_ids'.", param="part_ids")
        async with self.db.read() as session:
            found = await UploadRepository(session).parts(upload.id, part_ids)
        missing = [part_id for part_id in part_ids if part_id not in found]
        if missing:
            raise InvalidRequest(f"No such Part in Upload {upload.id}: {missing[0]}", param="part_ids")
        parts = [found[part_id] for part_id in part_ids]
        total = sum(part.bytes for part in parts)
        if total != upload.bytes:
            raise InvalidRequest(
                f"The number of bytes in the parts ({total}) does not match the number of bytes specified "
                f"when the Upload was created ({upload.bytes}).",
                param="part_ids",
            )
        return parts

    async def _concatenate(self, project: str, parts: list[UploadPart]) -> tuple[BlobWriter, str]:
        """The parts' bytes, in order, in one new writer; and their md5."""
        writer = self.store.new_writer()
        md5 = hashlib.md5(usedforsecurity=False)
        try:
            for part in parts:
                async for chunk in self.store.read(project, part.id):
                    writer.write(chunk)
                    md5.update(chunk)
                    await writer.drain()
        except BaseException:
            await writer.discard()
            raise
        return writer, md5.hexdigest()

    async def complete(
        self, project: str, upload_id: str, request: UploadCompleteRequest | None
    ) -> tuple[Upload, File]:
        if request is None:
            raise MissingParameter("part_ids")
        upload = await self._read_pending(project, upload_id, "complete")
        parts = await self._ordered_parts(upload, request.part_ids)
        async with self.db.read() as session:  # files stored since the upload was created count
            await check_upload(session, self.settings, project, upload.bytes)
        writer, md5 = await self._concatenate(project, parts)
        if request.md5 is not None and request.md5.strip().lower() != md5:
            await writer.discard()
            raise InvalidRequest(
                f"The md5 of the uploaded bytes ({md5}) does not match the 'md5' given ({request.md5}).",
                param="md5",
                code="md5_mismatch",
            )
        file = await commit_new_file(
            self.session,
            self.store,
            writer,
            file_id=new_file_id(),
            project=project,
            filename=upload.filename,
            purpose=upload.purpose,
            expires_after=upload.file_expires_after,
        )
        locked = self._require_pending(await self.repo.get(project, upload_id, for_update=True), upload_id, "complete")
        if not await self.repo.finish(locked, UploadStatus.COMPLETED, file.id):
            raise _not_pending(upload_id, "complete", "no longer pending")
        await FileRepository(self.session).add(file)
        after_commit(self.session, lambda: remove_parts(self.db, self.store, upload_id))
        return locked, file

    async def cancel(self, project: str, upload_id: str) -> Upload:
        upload = self._require_pending(await self.repo.get(project, upload_id, for_update=True), upload_id, "cancel")
        if not await self.repo.finish(upload, UploadStatus.CANCELLED):
            raise _not_pending(upload_id, "cancel", "no longer pending")
        after_commit(self.session, lambda: remove_parts(self.db, self.store, upload_id))
        return upload


async def remove_parts(db: Database, store: BlobStore, upload_id: str | None = None) -> int:
    """Remove the parts of uploads that take no more parts (of one upload, or of all): blobs
    first, rows after, so a crash in between leaves rows the next sweep finishes, never blobs
    nobody knows about. Failures are logged; the periodic sweep tries again."""
    removed = 0
    try:
        while True:
            async with db.read() as session:
                parts = await UploadRepository(session).finished_parts(CLEANUP_BATCH, upload_id)
            for part in parts:
                await store.delete(part.project, part.id)
            if parts:
                async with db.write() as session:
                    await UploadRepository(session).delete_parts(parts)
            removed += len(parts)
            if len(parts) < CLEANUP_BATCH:
                return removed
    except Exception:  # noqa: BLE001 - the sweep retries; the request that triggered it succeeded
        log.warning("removing upload parts failed; the sweep will retry", exc_info=True)
        return removed
