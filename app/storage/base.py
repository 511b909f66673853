"""The blob store interface every backend implements (local directory, S3).

Callers never see a filesystem path: bytes go in through a writer (streamed, committed under a
server-made id) and come out as an async stream of chunks, optionally a byte range."""

from __future__ import annotations

from collections.abc import AsyncIterator
from typing import Protocol

# Read size for streamed blobs (content downloads, validation, shard reads).
READ_CHUNK_BYTES = 1024 * 1024


class BlobWriter(Protocol):
    """Bytes on their way into the store, counted and hashed as they arrive."""

    size: int

    @property
    def sha256(self) -> str: ...

    def write(self, data: bytes | memoryview) -> None:
        """Take bytes (synchronous, so parser callbacks can call it); may only buffer them."""

    async def drain(self) -> None:
        """Push what write() buffered on to the backend; call it between writes."""

    async def discard(self) -> None:
        """Drop everything written; nothing is left in the store."""


class BlobStore(Protocol):
    def new_writer(self, project: str | None = None, file_id: str | None = None) -> BlobWriter:
        """A writer for new bytes. Name the file when its id is already known: on S3 the upload
        then goes straight to its key instead of being copied there at commit."""

    async def commit(self, writer: BlobWriter, project: str, file_id: str) -> None:
        """Make the written bytes the blob of `file_id`, durably; on failure nothing is left."""

    def read(self, project: str, file_id: str, start: int = 0, end: int | None = None) -> AsyncIterator[bytes]:
        """The blob's bytes [start, end) as chunks (end None = to the end)."""

    async def delete(self, project: str, file_id: str) -> None:
        """Remove the blob; a missing blob is not an error."""

    async def exists(self, project: str, file_id: str) -> bool: ...

    def blob_name(self, project: str, file_id: str) -> str:
        """The name list_blobs() reports for this file's blob."""

    def list_blobs(self, older_than_seconds: float) -> AsyncIterator[str]:
        """Names of committed blobs last written more than `older_than_seconds` ago."""

    async def delete_named(self, name: str) -> None:
        """Remove the blob list_blobs() named; a missing blob is not an error."""

    async def sweep_temp(self, older_than_seconds: float) -> int:
        """Remove partial writes left by a process that died mid-upload."""

    async def close(self) -> None: ...
