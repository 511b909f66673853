"""Results by reference (batchd's): a batch created with `output_uri` (an `s3://` prefix the
operator allows, the same list file imports read under) or `output_urls` (presigned PUT URLs, by
file kind) has its output and error files copied there once it ends.

Here: the create-time checks of a destination, and one attempt at copying a batch's files. The
attempts are made by app/background/exporter.py, apart from the batch's finalize (no network
copy holds its transaction), and retried with backoff from the state in the batch's row.

An attempt streams each file from the blob store: to S3 as a multipart upload of PART_BYTES
parts (one part in memory; one PUT for a file smaller than a part), aborted if the attempt
fails; to a URL as one PUT of the file's known size (presigned S3 PUTs need Content-Length),
through the outbound policy, no redirect followed. The whole attempt has one deadline."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from dataclasses import dataclass

import httpx
from sqlalchemy.ext.asyncio import AsyncSession

from app.core.config import Settings
from app.core.errors import InvalidRequest
from app.core.outbound import OutboundPolicy, OutboundRefused, guarded_client
from app.domains.files.service import allowed_s3_prefixes, uri_not_allowed
from app.storage.base import BlobStore

# S3's least part size is 5 MiB (all but the last); the blob store's own parts are 8 MiB.
PART_BYTES = 8 * 1024 * 1024
# Connect, read and write timeouts of one PUT (the attempt's deadline bounds it whole).
HTTP_TIMEOUT_S = 60.0


@dataclass(frozen=True)
class ExportFile:
    """One of the batch's files to copy: its kind ("output" or "error"), id and size."""

    kind: str
    file_id: str
    size: int


class ExportFailed(Exception):
    """An attempt failed: `code` and the message become the batch's `export.error`."""

    def __init__(self, code: str, message: str) -> None:
        super().__init__(message)
        self.code = code

    def as_error(self) -> dict[str, str]:
        return {"code": self.code, "message": str(self)}


# -- create-time checks ---------------------------------------------------------------------


def normalized_prefix(uri: str) -> str:
    """`output_uri` as the prefix the files' keys start with: `s3://bucket/key/` (a `/` added
    after a key that has none), or 400 if it is not an `s3://bucket[/prefix]` URI."""
    from app.storage.s3 import split_s3_uri  # aiobotocore loads only when S3 is used

    try:
        bucket, key = split_s3_uri(uri)
    except ValueError as exc:
        raise InvalidRequest(f"Invalid 'output_uri': {exc}.", param="output_uri", code="invalid_value") from None
    if key and not key.endswith("/"):
        key += "/"
    return f"s3://{bucket}/{key}"


async def check_output_uri(session: AsyncSession, settings: Settings, project: str, prefix: str) -> None:
    """403 `uri_not_allowed` unless the operator allows the project to write under `prefix`: the
    same prefixes a file import may read under (BATCHD_IMPORT_ALLOWED_URIS, the project's own)."""
    from app.storage.s3 import uri_allowed

    if not uri_allowed(prefix, await allowed_s3_prefixes(session, settings, project)):
        raise uri_not_allowed(f"Writing results to {prefix!r}", project, "output_uri")


async def check_put_urls(urls: dict[str, str], policy: OutboundPolicy) -> None:
    """400 `url_refused` for a URL the outbound policy refuses now (each PUT is checked again)."""
    for kind, url in urls.items():
        try:
            await policy.vet(httpx.URL(url))
        except (OutboundRefused, httpx.InvalidURL) as exc:
            raise InvalidRequest(
                f"Invalid 'output_urls.{kind}': {exc}", param=f"output_urls.{kind}", code="url_refused"
            ) from None


# -- one attempt ----------------------------------------------------------------------------


def s3_key(prefix: str, batch_id: str, kind: str) -> tuple[str, str]:
    """(bucket, key) of the batch's `kind` file under the `s3://bucket/prefix/` it exports to."""
    from app.storage.s3 import split_s3_uri

    bucket, key = split_s3_uri(prefix)
    return bucket, f"{key}{batch_id}/{kind}.jsonl"


async def export_files(
    settings: Settings,
    store: BlobStore,
    project: str,
    batch_id: str,
    files: list[ExportFile],
    *,
    output_uri: str | None,
    output_urls: dict[str, str] | None,
) -> None:
    """Copy `files` to the batch's destination, within BATCHD_EXPORT_TIMEOUT_SECONDS; ExportFailed
    says why not. A file whose kind has no URL in `output_urls` is skipped."""
    deadline = settings.export_timeout_seconds
    try:
        async with asyncio.timeout(deadline):
            if output_uri is not None:
                await _to_s3(settings, store, project, batch_id, files, output_uri)
            elif output_urls is not None:
                for file in files:
                    url = output_urls.get(file.kind)
                    if url is not None:
                        await _put(settings.outbound_policy(), url, store.read(project, file.file_id), file)
    except TimeoutError:
        raise ExportFailed(
            "export_timeout", f"The export did not finish within {deadline:g} s (BATCHD_EXPORT_TIMEOUT_SECONDS)."
        ) from None


async def _to_s3(
    settings: Settings, store: BlobStore, project: str, batch_id: str, files: list[ExportFile], prefix: str
) -> None:
    from botocore.exceptions import BotoCoreError, ClientError

    from app.storage.s3 import import_client

    async with import_client(store, settings.s3_endpoint_url) as client:
        for file in files:
            bucket, key = s3_key(prefix, batch_id, file.kind)
            try:
                await _upload(client, bucket, key, store.read(project, file.file_id), settings.s3_encryption())
            except (BotoCoreError, ClientError) as exc:
                raise ExportFailed("s3_error", f"Writing s3://{bucket}/{key} failed: {exc}") from None


async def _upload(client, bucket: str, key: str, chunks: AsyncIterator[bytes], encryption: dict[str, str]) -> None:
    """The chunks as the object `key`: a multipart upload of PART_BYTES parts once there is more
    than one part (aborted if anything fails), else one PUT."""
    buffer = bytearray()
    upload_id: str | None = None
    parts: list[dict] = []

    async def send_part(body: bytes) -> None:
        number = len(parts) + 1
        reply = await client.upload_part(Bucket=bucket, Key=key, UploadId=upload_id, PartNumber=number, Body=body)
        parts.append({"PartNumber": number, "ETag": reply["ETag"]})

    try:
        async for chunk in chunks:
            buffer += chunk
            while len(buffer) >= PART_BYTES:
                if upload_id is None:
                    reply = await client.create_multipart_upload(Bucket=bucket, Key=key, **encryption)
                    upload_id = reply["UploadId"]
                body = bytes(buffer[:PART_BYTES])
                del buffer[:PART_BYTES]
                await send_part(body)
        if upload_id is None:
            await client.put_object(Bucket=bucket, Key=key, Body=bytes(buffer), **encryption)
            return
        if buffer:
            await send_part(bytes(buffer))
        await client.complete_multipart_upload(
            Bucket=bucket, Key=key, UploadId=upload_id, MultipartUpload={"Parts": parts}
        )
    except BaseException:
        if upload_id is not None:
            # Shielded: a deadline or shutdown cancels the attempt, and the abort must still run.
            await asyncio.shield(_abort(client, bucket, key, upload_id))
        raise


async def _abort(client, bucket: str, key: str, upload_id: str) -> None:
    from botocore.exceptions import BotoCoreError, ClientError

    try:
        await client.abort_multipart_upload(Bucket=bucket, Key=key, UploadId=upload_id)
    except (BotoCoreError, ClientError):
        pass  # the bucket's lifecycle rule for unfinished uploads is the operator's (docs/batches.md)


async def _put(policy: OutboundPolicy, url: str, chunks: AsyncIterator[bytes], file: ExportFile) -> None:
    """`PUT url` of the file's bytes, streamed, with its Content-Length; a 2xx is success."""
    # No Content-Type: a presigned URL may sign it (an older signature version does).
    headers = {"content-length": str(file.size)}
    try:
        async with guarded_client(policy, timeout=HTTP_TIMEOUT_S, follow_redirects=False) as client:
            # Streamed, and the reply's body never read: only its status counts.
            async with client.stream("PUT", url, content=chunks, headers=headers) as response:
                status = response.status_code
    except OutboundRefused as exc:
        raise ExportFailed("url_refused", f"The {file.kind} URL was refused: {exc}") from None
    except httpx.HTTPError as exc:  # the kind of failure, not what a reached server said
        raise ExportFailed("http_error", f"The PUT of the {file.kind} file failed ({type(exc).__name__}).") from None
    if not 200 <= status < 300:
        raise ExportFailed("http_status", f"The {file.kind} URL answered HTTP {status}.")
