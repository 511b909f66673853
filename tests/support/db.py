"""Direct access to a test server's database, for fault injection and assertions only."""

from __future__ import annotations

import asyncio

from sqlalchemy import text

from app.db.engine import Database
from app.storage.local import LocalBlobStore
from app.storage.s3 import S3BlobStore
from tests.support.server import ServerProcess


def database_url(server: ServerProcess) -> str:
    return server.database_url or f"sqlite+aiosqlite:///{(server.data_dir / 'batchd.db').resolve()}"


def execute(server: ServerProcess, sql: str, **params) -> list[tuple]:
    """Run one statement in its own transaction and return the rows (if any)."""

    async def run() -> list[tuple]:
        db = Database(database_url(server))
        try:
            async with db.write() as session:
                result = await session.execute(text(sql), params)
                return [tuple(row) for row in result] if result.returns_rows else []
        finally:
            await db.dispose()

    return asyncio.run(run())


def blob_files(server: ServerProcess) -> list:
    """Every committed blob and every partial write currently in the server's store: files under
    its blob directory, or its bucket's objects and unfinished multipart uploads."""
    if server.s3 is not None:
        objects, uploads = server.s3.contents()
        return objects + [f"(multipart upload) {key}" for key in uploads]
    root = server.data_dir / "blobs"
    return sorted(p for p in root.rglob("*") if p.is_file())


def has_blob(server: ServerProcess, project: str, file_id: str) -> bool:
    """Whether the server's store holds the committed blob of `file_id` (named the store's way)."""
    if server.s3 is not None:
        store = S3BlobStore(f"s3://{server.s3.bucket}/{server.s3.prefix}")
        return store.blob_name(project, file_id) in blob_files(server)
    root = (server.data_dir / "blobs").resolve()
    return (root / LocalBlobStore(root).blob_name(project, file_id)).is_file()
