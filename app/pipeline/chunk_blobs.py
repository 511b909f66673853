"""A checkpoint chunk's blob, read whole (its format: app/core/chunk_format.py)."""

from __future__ import annotations

from app.db.models import BatchChunk
from app.storage.base import BlobStore


async def chunk_bytes(store: BlobStore, project: str, chunk: BatchChunk) -> bytes:
    """The chunk's blob, whole (a chunk is a checkpoint write: at most a few hundred lines)."""
    if chunk.blob_id is None:  # carried over from the per-line rows (migration 0015)
        return chunk.payload or b""
    return b"".join([part async for part in store.read(project, chunk.blob_id)])
