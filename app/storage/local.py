"""Local-directory blob store.

Bytes are written to a temp file inside the store (same filesystem, so the final rename is
atomic), fsynced, renamed into place, and the directory fsynced so the rename survives a crash.
Paths derive only from server-generated ids (hashed), never from client filenames. Directories are
owner-only (0700) and blobs 0600 from their first byte (app/core/private_files.py).
"""

from __future__ import annotations

import asyncio
import contextlib
import hashlib
import os
import time
import uuid
from collections.abc import AsyncIterator
from pathlib import Path

from app.core.private_files import create_private_file, private_dir
from app.storage.base import READ_CHUNK_BYTES, BlobWriter

TEMP_DIR = "tmp"
FILES_DIR = "files"


def _digest(value: str) -> str:
    return hashlib.sha256(value.encode()).hexdigest()


class LocalBlobWriter:
    """An open temp file that counts and hashes what is written to it."""

    def __init__(self, path: Path) -> None:
        self.path = path
        self._fh = os.fdopen(create_private_file(path), "wb")  # closed in _finish()/discard()
        self._sha = hashlib.sha256()
        self.size = 0

    def write(self, data: bytes | memoryview) -> None:
        self._fh.write(data)
        self._sha.update(data)
        self.size += len(data)

    async def drain(self) -> None:
        """Nothing to do: write() already hands bytes to the OS."""

    @property
    def sha256(self) -> str:
        return self._sha.hexdigest()

    def _finish(self) -> None:
        self._fh.flush()
        os.fsync(self._fh.fileno())
        self._fh.close()

    def discard_sync(self) -> None:
        # Closing flushes the buffer, which fails on a full disk; the bytes are unwanted anyway.
        with contextlib.suppress(OSError):
            self._fh.close()
        self.path.unlink(missing_ok=True)

    async def discard(self) -> None:
        self.discard_sync()


class LocalBlobStore:
    def __init__(self, root: Path) -> None:
        self.root = root.resolve()
        for directory in (self.root, self.root / TEMP_DIR, self.root / FILES_DIR):
            private_dir(directory)

    def _path(self, project: str, file_id: str) -> Path:
        return self._named(self.blob_name(project, file_id))

    def _named(self, name: str) -> Path:
        path = self.root / name
        # Defence in depth: every component is server-made, but never leave the root.
        if not path.resolve().is_relative_to(self.root / FILES_DIR):
            raise ValueError("blob path escapes the store")
        return path

    def blob_name(self, project: str, file_id: str) -> str:
        digest = _digest(file_id)
        return f"{FILES_DIR}/{_digest(project)[:16]}/{digest[:2]}/{digest}"

    async def list_blobs(self, older_than_seconds: float) -> AsyncIterator[str]:
        cutoff = time.time() - older_than_seconds

        def old_blobs() -> list[str]:
            found = []
            for path in (self.root / FILES_DIR).glob("*/*/*"):
                try:
                    if path.is_file() and path.stat().st_mtime <= cutoff:
                        found.append(path.relative_to(self.root).as_posix())
                except FileNotFoundError:
                    pass
            return found

        for name in await asyncio.to_thread(old_blobs):
            yield name

    async def delete_named(self, name: str) -> None:
        await asyncio.to_thread(self._named(name).unlink, True)

    def new_writer(self, project: str | None = None, file_id: str | None = None) -> LocalBlobWriter:
        return LocalBlobWriter(self.root / TEMP_DIR / f"{uuid.uuid4().hex}.tmp")

    async def commit(self, writer: BlobWriter, project: str, file_id: str) -> None:
        assert isinstance(writer, LocalBlobWriter), "a writer from another store"
        """fsync the temp file, rename it to the blob's path and fsync the directory.
        On failure the temp file is removed; an fsync error is never retried."""
        final = self._path(project, file_id)
        try:
            await asyncio.to_thread(self._commit_sync, writer, final)
        except BaseException:
            writer.discard_sync()
            raise

    @staticmethod
    def _commit_sync(writer: LocalBlobWriter, final: Path) -> None:
        writer._finish()
        private_dir(final.parent)
        os.replace(writer.path, final)
        dir_fd = os.open(final.parent, os.O_RDONLY)
        try:
            os.fsync(dir_fd)
        finally:
            os.close(dir_fd)

    async def read(self, project: str, file_id: str, start: int = 0, end: int | None = None) -> AsyncIterator[bytes]:
        fh = await asyncio.to_thread(open, self._path(project, file_id), "rb")
        try:
            if start:
                fh.seek(start)
            remaining = None if end is None else max(0, end - start)
            while remaining is None or remaining > 0:
                size = READ_CHUNK_BYTES if remaining is None else min(READ_CHUNK_BYTES, remaining)
                chunk = await asyncio.to_thread(fh.read, size)
                if not chunk:
                    return
                if remaining is not None:
                    remaining -= len(chunk)
                yield chunk
        finally:
            fh.close()

    async def exists(self, project: str, file_id: str) -> bool:
        return self._path(project, file_id).is_file()

    async def delete(self, project: str, file_id: str) -> None:
        await self.delete_named(self.blob_name(project, file_id))

    async def sweep_temp(self, older_than_seconds: float = 0) -> int:
        """Remove temp files left by uploads that died with the process."""
        cutoff = time.time() - older_than_seconds
        removed = 0
        for tmp in (self.root / TEMP_DIR).glob("*.tmp"):
            try:
                if tmp.stat().st_mtime <= cutoff:
                    tmp.unlink()
                    removed += 1
            except FileNotFoundError:
                pass
        return removed

    async def close(self) -> None:
        """Nothing held open between calls."""
