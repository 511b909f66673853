"""Files, uploads, batches and their blobs put straight into the database and the store, for
the sweeps to find."""

from __future__ import annotations

from sqlalchemy import select

from app.core.chunk_format import pack_line_nos
from app.core.statuses import UploadStatus
from app.db.engine import Database
from app.db.models import BatchChunk, File, Upload, UploadPart
from app.db.repositories.chunks import ChunkRepository
from app.storage.base import BlobStore
from tests.worker.support import PROJECT
from tests.worker.support import add_batch as add_batch


async def add_blob(store: BlobStore, blob_id: str) -> None:
    writer = store.new_writer(PROJECT, blob_id)
    writer.write(b"x\n")
    await store.commit(writer, PROJECT, blob_id)


async def add_file(
    db: Database, store: BlobStore, file_id: str, *, expires_at: int | None = None, deleted_at: int | None = None
) -> None:
    await add_blob(store, file_id)
    async with db.write() as session:
        session.add(
            File(
                id=file_id,
                project=PROJECT,
                filename=f"{file_id}.jsonl",
                purpose="batch",
                bytes=2,
                created_at=0,
                expires_at=expires_at,
                sha256="",
                deleted_at=deleted_at,
            )
        )


async def add_upload(db: Database, store: BlobStore, upload_id: str, status: UploadStatus, expires_at: int) -> None:
    """The upload and one part of it (a blob named after the upload: `<upload_id>-part`)."""
    await add_blob(store, f"{upload_id}-part")
    async with db.write() as session:
        session.add(
            Upload(
                id=upload_id,
                project=PROJECT,
                filename=f"{upload_id}.jsonl",
                purpose="batch",
                mime_type="text/jsonl",
                bytes=2,
                status=status,
                created_at=0,
                expires_at=expires_at,
            )
        )
        await session.flush()
        session.add(UploadPart(id=f"{upload_id}-part", upload_id=upload_id, project=PROJECT, bytes=2, created_at=0))


async def add_chunk(db: Database, store: BlobStore, batch_id: str, blob_id: str) -> None:
    """A results chunk of one line, as a shard's checkpoint leaves it."""
    await add_blob(store, blob_id)
    async with db.write() as session:
        await ChunkRepository(session).add(batch_id, 0, blob_id, pack_line_nos([0]), 1)


async def ids(db: Database, column) -> set:
    async with db.read() as session:
        return set((await session.scalars(select(column))).all())


async def chunk_blobs(db: Database) -> set[str]:
    return await ids(db, BatchChunk.blob_id)
