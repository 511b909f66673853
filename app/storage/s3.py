"""S3-compatible blob store (AWS S3, SeaweedFS, MinIO, ...), through aiobotocore.

Writes stream as multipart uploads of PART_BYTES parts, one part buffered and up to
PARTS_IN_FLIGHT going up beside the writer (its caller fills the next part meanwhile), so a file
never sits whole in memory or on local disk; S3 makes the object visible only when the upload
completes, which gives the same all-or-nothing commit as the local store's rename. A discarded
or failed write aborts its multipart upload, so nothing is left in the bucket. A blob smaller
than one part goes up in a single PUT at commit. Reads come in READ_CHUNK_BYTES pieces.

Server-side encryption (BATCHD_S3_SSE) is asked for on every request that makes an object: a PUT,
the creation of a multipart upload (its parts follow it) and the copy of a temp object.

The sweep (:meth:`S3BlobStore.sweep_temp`) aborts a multipart upload only when no writer of this
process owns it and it is older than the longest a write may take (``BATCHD_MAX_WRITE_SECONDS``;
a write still going then fails), so another replica's upload in progress is never aborted under it.

Keys derive from server-made ids only: <prefix>/files/<project digest>/<file id>. A writer
opened without its file's id (the id is chosen later) uploads under <prefix>/tmp/ and is copied
to its key at commit: that costs a server-side copy, so callers that know the id pass it.
"""

from __future__ import annotations

import asyncio
import hashlib
import io
import logging
import re
import time
import uuid
import weakref
from collections.abc import AsyncIterator
from contextlib import AsyncExitStack, asynccontextmanager
from urllib.parse import urlsplit

from aiobotocore.config import AioConfig
from aiobotocore.session import get_session
from botocore.exceptions import ClientError

from app.storage.base import READ_CHUNK_BYTES, BlobWriter

log = logging.getLogger("batchd.storage")

# S3's minimum part size is 5 MiB (all but the last); 8 MiB bounds the buffer per upload.
PART_BYTES = 8 * 1024 * 1024
# Parts of one writer uploading at once while its caller fills the next: one PUT of a part after
# another ran at ~116 MiB/s on SeaweedFS (W9's finalize waited on them: 2.5 s of 5.8), three at
# once at ~190. A writer holds at most (1 + PARTS_IN_FLIGHT) parts.
PARTS_IN_FLIGHT = 2
FILES_DIR = "files"
TEMP_DIR = "tmp"
_SAFE_ID = re.compile(r"^[A-Za-z0-9_-]{1,200}$")
_MISSING = {"404", "NoSuchKey", "NotFound"}
# The longest one write may take by default (Settings.max_write_seconds).
MAX_WRITE_SECONDS = 6 * 3600.0


class WriteTooLong(TimeoutError):
    """A write went on past the longest a write may take: the sweep may abort its upload by now."""


def parse_s3_url(url: str) -> tuple[str, str]:
    """`s3://bucket/some/prefix` -> ("bucket", "some/prefix")."""
    parts = urlsplit(url)
    if parts.scheme != "s3" or not parts.netloc:
        raise ValueError(f"storage URL must look like s3://bucket/prefix, got {url!r}")
    return parts.netloc, parts.path.strip("/")


def split_s3_uri(uri: str) -> tuple[str, str]:
    """`s3://bucket/some/key` -> ("bucket", "some/key"), the key as written (a trailing `/`
    kept: an allowed prefix `s3://b/in/` does not cover `s3://b/input/x`). A key with an empty,
    `.` or `..` segment is refused, so it means what it says on every S3 server."""
    parts = urlsplit(uri)
    if parts.scheme != "s3" or not parts.netloc or parts.query or parts.fragment:
        raise ValueError(f"expected s3://bucket/key, got {uri!r}")
    key = parts.path[1:] if parts.path.startswith("/") else parts.path
    body = key[:-1] if key.endswith("/") else key
    if body and any(segment in ("", ".", "..") for segment in body.split("/")):
        raise ValueError(f"{uri!r}: an empty, '.' or '..' path segment")
    return parts.netloc, key


def uri_allowed(uri: str, prefixes: list[str]) -> bool:
    """Whether `s3://bucket/key` lies under one of `prefixes` (same bucket, the key starts with
    the prefix's key)."""
    bucket, key = split_s3_uri(uri)
    for prefix in prefixes:
        try:
            allowed_bucket, allowed_key = split_s3_uri(prefix)
        except ValueError:
            continue
        if allowed_bucket == bucket and key.startswith(allowed_key):
            return True
    return False


@asynccontextmanager
async def import_client(store: object, endpoint_url: str | None) -> AsyncIterator:
    """An S3 client with the server's credentials: the blob store's own when it is in S3, else one
    made for this import (the AWS chain, BATCHD_S3_ENDPOINT_URL)."""
    if isinstance(store, S3BlobStore):
        yield await store.client()
        return
    config = AioConfig(retries={"mode": "standard", "max_attempts": 5})
    async with get_session().create_client("s3", endpoint_url=endpoint_url or None, config=config) as client:
        yield client


async def read_object(client, bucket: str, key: str, max_bytes: int) -> AsyncIterator[bytes]:
    """The object's bytes in READ_CHUNK_BYTES-sized pieces at most; FileNotFoundError if it is
    not there, ValueError if it is larger than `max_bytes` (checked before reading)."""
    try:
        reply = await client.get_object(Bucket=bucket, Key=key)
    except ClientError as exc:
        if _missing(exc) or exc.response.get("Error", {}).get("Code") == "NoSuchBucket":
            raise FileNotFoundError(f"s3://{bucket}/{key}") from None
        raise
    async with reply["Body"] as body:
        if reply.get("ContentLength", 0) > max_bytes:
            raise ValueError("larger than allowed")
        async for piece in body.iter_chunks(READ_CHUNK_BYTES):
            yield piece


def _digest(value: str) -> str:
    return hashlib.sha256(value.encode()).hexdigest()


def _missing(exc: ClientError) -> bool:
    return exc.response.get("Error", {}).get("Code") in _MISSING


class S3BlobWriter:
    """Bytes on their way into one multipart upload (begun once a full part has arrived)."""

    def __init__(self, store: S3BlobStore, key: str | None) -> None:
        self.store = store
        self.key = key  # the final key, when the caller named the file up front
        self.size = 0
        self._sha = hashlib.sha256()  # of the bytes before the buffer
        # The part being filled. A BytesIO written into owns its bytes, and goes up as the part's
        # body as it is: botocore would wrap bytes in a BytesIO sharing them, and aiohttp's
        # getbuffer() on that one copies them (two copies of every part in flight, one in
        # bytes(bytearray) before it: 65 MB of RSS over a 300 MB import instead of < 50). A part's
        # BytesIO, once up, is filled again (written over from its start): a writer allocates its
        # 1 + PARTS_IN_FLIGHT parts once, not a new 8 MiB buffer grown from nothing per part.
        self._buffer = io.BytesIO()
        self._spare: list[io.BytesIO] = []
        self._upload_key: str | None = None
        self._upload_id: str | None = None
        self._parts: list[dict] = []
        self._next_part = 1
        self._sending: set[asyncio.Task[None]] = set()
        self._began = 0.0  # time.time() at the multipart upload's creation

    def _check_age(self) -> None:
        limit = self.store.max_write_seconds
        if self._upload_id is not None and time.time() - self._began > limit:
            raise WriteTooLong(f"writing the blob took longer than {limit:.0f} s (BATCHD_MAX_WRITE_SECONDS)")

    @property
    def sha256(self) -> str:
        sha = self._sha.copy()
        with self._buffer.getbuffer() as view, view[: self._buffer.tell()] as part:
            sha.update(part)
        return sha.hexdigest()

    def write(self, data: bytes | memoryview) -> None:
        self._buffer.write(data)
        self.size += len(data)

    async def drain(self) -> None:
        if self._buffer.tell() >= PART_BYTES:
            await self._send_part()

    def _take_buffer(self) -> io.BytesIO:
        """The part filled so far, from its start, as a request body; a spare one (or a new one)
        is filled next, from its start."""
        body = self._buffer
        body.truncate()  # what a spare held past this part's end (kept allocated: a part's as long)
        body.seek(0)
        self._buffer = self._spare.pop() if self._spare else io.BytesIO()
        self._buffer.seek(0)
        return body

    async def _send_part(self) -> None:
        """Hash the buffer as the next part and start its upload, once fewer than
        PARTS_IN_FLIGHT are going up (an upload that failed raises here)."""
        s3 = await self.store.client()
        if self._upload_id is None:
            self._upload_key = self.key or self.store.temp_key()
            self._began = time.time()
            reply = await s3.create_multipart_upload(
                Bucket=self.store.bucket, Key=self._upload_key, **self.store.encryption
            )
            self._upload_id = reply["UploadId"]
            self.store.live_uploads[self._upload_id] = self
        self._check_age()
        # In a thread: hashlib lets go of the GIL over a part, so the event loop goes on meanwhile.
        # Hashed in place, and taken once a place is free: the part filled next is the buffer of
        # one that is up, so a writer holds at most 1 + PARTS_IN_FLIGHT buffers.
        with self._buffer.getbuffer() as view, view[: self._buffer.tell()] as part:
            await asyncio.to_thread(self._sha.update, part)
        while len(self._sending) >= PARTS_IN_FLIGHT:
            await self._settle(asyncio.FIRST_COMPLETED)
        body, number = self._take_buffer(), self._next_part
        self._next_part += 1
        self._sending.add(asyncio.create_task(self._upload_part(s3, number, body)))

    async def _upload_part(self, s3, number: int, body: io.BytesIO) -> None:
        reply = await s3.upload_part(
            Bucket=self.store.bucket, Key=self._upload_key, UploadId=self._upload_id, PartNumber=number, Body=body
        )
        self._parts.append({"PartNumber": number, "ETag": reply["ETag"]})
        self._spare.append(body)  # up (and no retry of it reads it again): the next part to fill

    async def _settle(self, return_when: str = asyncio.ALL_COMPLETED) -> None:
        """Wait for part uploads (one, or all of them); the first that failed raises."""
        done, _ = await asyncio.wait(self._sending, return_when=return_when)
        self._sending -= done
        for task in done:
            task.result()

    async def finish(self, final_key: str) -> None:
        """Complete the upload (or PUT a small blob) so `final_key` holds the bytes."""
        s3 = await self.store.client()
        bucket = self.store.bucket
        if self._upload_id is None:
            body = self._take_buffer()
            with body.getbuffer() as view:  # hashed: `sha256` is read after the commit too (finalize)
                self._sha.update(view)
            await s3.put_object(Bucket=bucket, Key=final_key, Body=body, **self.store.encryption)
            return
        if self._buffer.tell():
            await self._send_part()
        if self._sending:
            await self._settle()
        self._spare.clear()  # every part is up: their buffers go now, not with the writer
        self._check_age()
        parts = sorted(self._parts, key=lambda part: part["PartNumber"])
        await s3.complete_multipart_upload(
            Bucket=bucket, Key=self._upload_key, UploadId=self._upload_id, MultipartUpload={"Parts": parts}
        )
        self.store.live_uploads.pop(self._upload_id, None)
        self._upload_id = None
        if self._upload_key != final_key:
            try:
                await s3.copy_object(
                    Bucket=bucket,
                    Key=final_key,
                    CopySource={"Bucket": bucket, "Key": self._upload_key},
                    **self.store.encryption,
                )
            finally:
                await s3.delete_object(Bucket=bucket, Key=self._upload_key)

    async def discard(self) -> None:
        self._buffer, self._spare = io.BytesIO(), []
        sending, self._sending = self._sending, set()
        upload_id, self._upload_id = self._upload_id, None
        if upload_id is None:  # (no part goes up before the upload is created)
            return
        # Shielded: a client disconnect cancels the request task, and the abort must still run.
        await asyncio.shield(self._abort(upload_id, sending))

    async def _abort(self, upload_id: str, sending: set[asyncio.Task[None]]) -> None:
        if sending:  # waited for, not cancelled: a part the server is still writing could outlive the abort
            await asyncio.wait(sending)
            for task in sending:
                if not task.cancelled():
                    task.exception()  # taken, so it is not reported as never retrieved
        s3 = await self.store.client()
        # No longer live, aborted or not: an upload whose abort failed is the sweep's.
        self.store.live_uploads.pop(upload_id, None)
        try:
            await s3.abort_multipart_upload(Bucket=self.store.bucket, Key=self._upload_key, UploadId=upload_id)
        except ClientError:
            log.warning(
                "could not abort multipart upload %s of %s; the temp sweep will",
                upload_id,
                self._upload_key,
                exc_info=True,
            )


class S3BlobStore:
    """Blobs in one bucket under one key prefix; credentials and region from the AWS chain.
    `encryption`: the server-side encryption parameters of every write (Settings.s3_encryption);
    `max_write_seconds`: the longest one write may take (Settings.max_write_seconds)."""

    def __init__(
        self,
        url: str,
        endpoint_url: str | None = None,
        *,
        encryption: dict[str, str] | None = None,
        max_write_seconds: float = MAX_WRITE_SECONDS,
    ) -> None:
        self.bucket, self.prefix = parse_s3_url(url)
        self.endpoint_url = endpoint_url or None
        self.encryption = dict(encryption or {})
        self.max_write_seconds = max_write_seconds
        # The multipart uploads this process's writers are writing, by upload id. Weak: a writer
        # dropped without commit or discard (its task cancelled hard) leaves them to the sweep.
        self.live_uploads: weakref.WeakValueDictionary[str, S3BlobWriter] = weakref.WeakValueDictionary()
        self._stack: AsyncExitStack | None = None
        self._client = None
        self._lock = asyncio.Lock()

    def _key(self, *parts: str) -> str:
        return "/".join(p for p in (self.prefix, *parts) if p)

    def blob_name(self, project: str, file_id: str) -> str:
        if not _SAFE_ID.match(file_id):
            raise ValueError("blob ids are server-made: letters, digits, - and _ only")
        return self._key(FILES_DIR, _digest(project)[:16], file_id)

    def temp_key(self) -> str:
        return self._key(TEMP_DIR, uuid.uuid4().hex)

    async def client(self):
        """The shared client, made on first use; fails clearly if the bucket is not there."""
        if self._client is not None:
            return self._client
        async with self._lock:
            if self._client is None:
                stack = AsyncExitStack()
                config = AioConfig(
                    # One pass over each part fewer: integrity comes from TLS (and from SigV4's
                    # payload hash, which botocore keeps over plain HTTP).
                    request_checksum_calculation="when_required",
                    s3={"payload_signing_enabled": False},
                    retries={"mode": "standard", "max_attempts": 5},
                )
                client = await stack.enter_async_context(
                    get_session().create_client("s3", endpoint_url=self.endpoint_url, config=config)
                )
                try:
                    await client.head_bucket(Bucket=self.bucket)
                except ClientError as exc:
                    await stack.aclose()
                    where = self.endpoint_url or "AWS"
                    if _missing(exc) or exc.response.get("Error", {}).get("Code") == "NoSuchBucket":
                        raise RuntimeError(
                            f"S3 bucket {self.bucket!r} does not exist at {where}; create it first "
                            f"(batchd does not create buckets)"
                        ) from None
                    raise RuntimeError(f"S3 bucket {self.bucket!r} at {where} is not usable: {exc}") from None
                self._stack, self._client = stack, client
        return self._client

    def new_writer(self, project: str | None = None, file_id: str | None = None) -> S3BlobWriter:
        named = self.blob_name(project, file_id) if project is not None and file_id is not None else None
        return S3BlobWriter(self, named)

    async def commit(self, writer: BlobWriter, project: str, file_id: str) -> None:
        assert isinstance(writer, S3BlobWriter), "a writer from another store"
        final = self.blob_name(project, file_id)
        if writer.key is not None and writer.key != final:
            raise ValueError("writer was opened for another file")
        try:
            await writer.finish(final)
        except BaseException:
            await writer.discard()
            raise

    async def read(self, project: str, file_id: str, start: int = 0, end: int | None = None) -> AsyncIterator[bytes]:
        if end is not None and end <= start:
            return
        s3 = await self.client()
        ranged = {} if start == 0 and end is None else {"Range": f"bytes={start}-{'' if end is None else end - 1}"}
        try:
            reply = await s3.get_object(Bucket=self.bucket, Key=self.blob_name(project, file_id), **ranged)
        except ClientError as exc:
            if _missing(exc):
                raise FileNotFoundError(f"no blob for {file_id}") from None
            if exc.response.get("Error", {}).get("Code") == "InvalidRange":
                return  # a range starting at or past the end of the blob: no bytes
            raise
        async with reply["Body"] as body:
            # aiohttp hands over what its socket buffer holds (64-128 KiB): joined into
            # READ_CHUNK_BYTES pieces, so a reader (validation's thread, a shard) takes few, large ones.
            pieces: list[bytes] = []
            size = 0
            async for piece in body.iter_chunks(READ_CHUNK_BYTES):
                pieces.append(piece)
                size += len(piece)
                if size >= READ_CHUNK_BYTES:
                    yield b"".join(pieces)
                    pieces.clear()
                    size = 0
            if pieces:
                yield b"".join(pieces)

    async def exists(self, project: str, file_id: str) -> bool:
        try:
            await (await self.client()).head_object(Bucket=self.bucket, Key=self.blob_name(project, file_id))
            return True
        except ClientError as exc:
            if _missing(exc):
                return False
            raise

    async def delete(self, project: str, file_id: str) -> None:
        await self.delete_named(self.blob_name(project, file_id))

    async def delete_named(self, name: str) -> None:
        await (await self.client()).delete_object(Bucket=self.bucket, Key=name)

    async def _objects(self, under: str) -> AsyncIterator[dict]:
        paginator = (await self.client()).get_paginator("list_objects_v2")
        async for page in paginator.paginate(Bucket=self.bucket, Prefix=self._key(under) + "/"):
            for obj in page.get("Contents", []):
                yield obj

    async def list_blobs(self, older_than_seconds: float) -> AsyncIterator[str]:
        cutoff = time.time() - older_than_seconds
        async for obj in self._objects(FILES_DIR):
            if obj["LastModified"].timestamp() <= cutoff:
                yield obj["Key"]

    async def sweep_temp(self, older_than_seconds: float = 0) -> int:
        """Abort multipart uploads and remove temp objects left by a process that died mid-write:
        temp objects once `older_than_seconds` old, multipart uploads once no writer here owns
        them and they are older than the longest a write may take (another replica's may be
        under way until then, and is no longer after it: its writer fails)."""
        s3 = await self.client()
        now = time.time()
        cutoff = now - older_than_seconds
        upload_cutoff = now - max(older_than_seconds, self.max_write_seconds)
        removed = 0
        paginator = s3.get_paginator("list_multipart_uploads")
        async for page in paginator.paginate(Bucket=self.bucket, Prefix=f"{self.prefix}/" if self.prefix else ""):
            for upload in page.get("Uploads", []):
                owned = upload["UploadId"] in self.live_uploads
                if not owned and upload["Initiated"].timestamp() <= upload_cutoff:
                    await s3.abort_multipart_upload(Bucket=self.bucket, Key=upload["Key"], UploadId=upload["UploadId"])
                    removed += 1
        async for obj in self._objects(TEMP_DIR):
            if obj["LastModified"].timestamp() <= cutoff:
                await s3.delete_object(Bucket=self.bucket, Key=obj["Key"])
                removed += 1
        return removed

    async def close(self) -> None:
        if self._stack is not None:
            await self._stack.aclose()
        self._stack = self._client = None
