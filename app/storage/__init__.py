"""Blob storage: one interface (base.BlobStore), a backend chosen by the storage URL."""

from __future__ import annotations

from app.core.config import Settings
from app.storage.base import BlobStore, BlobWriter
from app.storage.local import LocalBlobStore


def open_store(settings: Settings) -> BlobStore:
    """The store the settings name: the data dir's blob directory by default, a local directory
    for a path, a bucket for s3://bucket/prefix."""
    url = settings.storage_url.strip()
    if url.startswith("s3://"):
        from app.storage.s3 import S3BlobStore  # aiobotocore loads only when S3 is used

        return S3BlobStore(
            url,
            settings.s3_endpoint_url,
            encryption=settings.s3_encryption(),
            max_write_seconds=settings.max_write_seconds,
        )
    if "://" in url:
        raise ValueError(f"unsupported storage URL {url!r}: use s3://bucket/prefix or a directory")
    return LocalBlobStore(settings.blob_dir)


__all__ = ["BlobStore", "BlobWriter", "open_store"]
