"""Direct (synchronous) access to the test S3 server's buckets, for assertions and fault
injection only: what objects and unfinished multipart uploads a bucket holds."""

from __future__ import annotations

import uuid
from dataclasses import dataclass

from harness.seaweedfs import SeaweedFS, client, ensure_bucket


@dataclass(frozen=True)
class S3Location:
    """Where one test server keeps its blobs: a bucket of its own, under a key prefix."""

    server: SeaweedFS
    bucket: str
    prefix: str = "blobs"

    @classmethod
    def fresh(cls, server: SeaweedFS) -> S3Location:
        location = cls(server, f"batchd-{uuid.uuid4().hex[:12]}")
        ensure_bucket(server, location.bucket)
        return location

    def env(self) -> dict[str, str]:
        return self.server.env(self.bucket, self.prefix)

    def contents(self) -> tuple[list[str], list[str]]:
        return contents(self.server, self.bucket, self.prefix)


def keys(s3server, bucket: str, prefix: str = "") -> list[str]:
    """Every object key under `prefix`."""
    c, found, token = client(s3server), [], None
    while True:
        kwargs = {"Bucket": bucket, "Prefix": prefix, **({"ContinuationToken": token} if token else {})}
        page = c.list_objects_v2(**kwargs)
        found += [obj["Key"] for obj in page.get("Contents", [])]
        if not page.get("IsTruncated"):
            return sorted(found)
        token = page["NextContinuationToken"]


def uploads(s3server, bucket: str, prefix: str = "") -> list[str]:
    """Keys of multipart uploads begun and neither completed nor aborted."""
    page = client(s3server).list_multipart_uploads(Bucket=bucket, Prefix=prefix)
    return sorted(u["Key"] for u in page.get("Uploads", []))


def contents(s3server, bucket: str, prefix: str = "") -> tuple[list[str], list[str]]:
    """(object keys, unfinished multipart upload keys): everything an upload could leave behind."""
    return keys(s3server, bucket, prefix), uploads(s3server, bucket, prefix)


def put(s3server, bucket: str, key: str, data: bytes) -> None:
    client(s3server).put_object(Bucket=bucket, Key=key, Body=data)
