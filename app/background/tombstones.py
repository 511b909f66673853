"""Tombstones: a deleted file or batch keeps its row (so its id still works as a list cursor)
for a grace period, then the row goes."""

from __future__ import annotations

import time

from app.db.engine import Database
from app.db.repositories.batches import BatchRepository
from app.db.repositories.files import FileRepository


async def purge_file_tombstones(db: Database, grace_seconds: float) -> int:
    """Delete the rows of files deleted more than `grace_seconds` ago."""
    async with db.write() as session:
        return await FileRepository(session).purge_tombstones(int(time.time() - grace_seconds))


async def purge_batch_tombstones(db: Database, grace_seconds: float) -> int:
    """Forget batches deleted more than `grace_seconds` ago (their ids stop working as cursors)."""
    async with db.write() as session:
        return await BatchRepository(session).purge_tombstones(int(time.time() - grace_seconds))
