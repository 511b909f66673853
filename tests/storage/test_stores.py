"""The blob store interface, the same checks on both backends (a local directory, a SeaweedFS
bucket): streamed multipart writes, ranged reads, writers opened with or without their file's
id, discard and the temp sweep leaving nothing, listing for the orphan reconcile."""

from __future__ import annotations

import asyncio
import os

import pytest

from app.storage.local import LocalBlobStore
from app.storage.s3 import PART_BYTES, S3BlobStore
from tests.support.s3 import S3Location

BLOB = os.urandom(2 * PART_BYTES + 12345)  # three parts on S3, the last one short


@pytest.fixture(params=["local", "s3"])
def store_and_contents(request, tmp_path, monkeypatch):
    """(store, function listing everything it holds, partial writes included)."""
    if request.param == "local":
        store = LocalBlobStore(tmp_path / "blobs")
        return store, lambda: sorted(str(p) for p in (tmp_path / "blobs").rglob("*") if p.is_file())
    location = S3Location.fresh(request.getfixturevalue("seaweedfs"))
    for name, value in location.env().items():
        monkeypatch.setenv(name, value)
    store = S3BlobStore(f"s3://{location.bucket}/{location.prefix}", location.server.endpoint_url)
    return store, lambda: [*location.contents()[0], *location.contents()[1]]


async def _write(store, data: bytes, project: str | None = None, file_id: str | None = None):
    writer = store.new_writer(project, file_id)
    for start in range(0, len(data), 1024 * 1024):
        writer.write(data[start : start + 1024 * 1024])
        await writer.drain()
    return writer


def _restarted(store: S3BlobStore) -> S3BlobStore:
    return S3BlobStore(f"s3://{store.bucket}/{store.prefix}", store.endpoint_url, max_write_seconds=0.001)


async def _read(store, *args) -> bytes:
    return b"".join([chunk async for chunk in store.read(*args)])


def test_write_read_ranges_delete(store_and_contents):
    store, contents = store_and_contents

    async def run() -> None:
        try:
            named = await _write(store, BLOB, "proj", "file-named")
            await store.commit(named, "proj", "file-named")
            unnamed = await _write(store, BLOB)  # the id is chosen after the bytes arrive
            await store.commit(unnamed, "proj", "file-unnamed")
            small = await _write(store, b"tiny")
            await store.commit(small, "proj", "file-small")
            assert (named.size, named.sha256) == (len(BLOB), unnamed.sha256)
            for file_id in ("file-named", "file-unnamed"):
                assert await _read(store, "proj", file_id) == BLOB
            assert await _read(store, "proj", "file-small") == b"tiny"
            edge = PART_BYTES
            for start, end in (
                (0, 10),
                (edge - 5, edge + 5),
                (edge, None),
                (len(BLOB) - 3, len(BLOB) + 100),
                (7, 7),
                (len(BLOB), None),
            ):
                assert await _read(store, "proj", "file-named", start, end) == BLOB[start:end], (start, end)
            assert await store.exists("proj", "file-named")
            assert not await store.exists("proj", "file-missing")
            assert len(contents()) == 3  # no temp object or upload left by the unnamed writer
            listed = {name async for name in store.list_blobs(0)}
            assert listed == {store.blob_name("proj", f) for f in ("file-named", "file-unnamed", "file-small")}
            assert {name async for name in store.list_blobs(3600)} == set()
            await store.delete("proj", "file-named")
            await store.delete("proj", "file-named")  # a missing blob is not an error
            await store.delete_named(store.blob_name("proj", "file-unnamed"))
            assert not await store.exists("proj", "file-named")
            assert len(contents()) == 1
            with pytest.raises(FileNotFoundError):
                await _read(store, "proj", "file-named")
        finally:
            await store.close()

    asyncio.run(run())


def test_discard_and_sweep_leave_nothing(store_and_contents):
    store, contents = store_and_contents

    async def run() -> None:
        try:
            before = contents()
            one_part = BLOB[: PART_BYTES + 1]  # one part sent, a byte still buffered
            discarded = await _write(store, one_part, "proj", "file-discarded")
            assert contents() != before  # a temp file, or a multipart upload with parts
            await discarded.discard()
            assert contents() == before
            # A writer whose process died: neither committed nor discarded.
            abandoned = await _write(store, one_part, "proj", "file-abandoned")
            await asyncio.gather(*getattr(abandoned, "_sending", ()))  # a dead process sends no more
            assert await store.sweep_temp(3600) == 0  # young: may be another process's upload
            assert contents() != before
            # The next process: it owns no write, and (on S3) a write may take no time at all.
            after = store if isinstance(store, LocalBlobStore) else _restarted(store)
            assert await after.sweep_temp(0) == 1
            assert contents() == before
            await after.close()
        finally:
            await store.close()

    asyncio.run(run())
