"""Blob storage: one interface (base.BlobStore), a backend chosen by the storage URL."""

from __future__ import annotations

from app.config import Settings
from app.storage.base import BlobStore, BlobWriter
from app.storage.local import LocalBlobStore


def open_store(settings: Settings) -> BlobStore:
    """The store the settings name: a local directory by default."""
    return LocalBlobStore(settings.blob_dir)


__all__ = ["BlobStore", "BlobWriter", "open_store"]
