"""Direct access to a test server's database (harness/db.py) and blob store, for fault injection and
assertions only."""

from __future__ import annotations

import time

from app.storage.local import LocalBlobStore
from app.storage.s3 import S3BlobStore
from harness.db import database_url, execute  # noqa: F401 - the tests reach a server's database through this module
from harness.server import ServerProcess


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


def hold_elsewhere(server: ServerProcess, batch_id: str) -> None:
    """Mark the batch in_progress under another replica's live lease: this server's worker leaves it alone."""
    execute(
        server,
        "UPDATE batches SET status = 'in_progress', lease_owner = 'elsewhere', "
        "lease_expires_at = :far, fence = fence + 1 WHERE id = :id",
        far=time.time() + 3600,
        id=batch_id,
    )
