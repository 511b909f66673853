"""The checkpoint chunk: finished lines of one shard, stored together as one blob (its lines'
format: app/pipeline/chunk_lines.py); the chunk's database row lists the line numbers it counts,
so every line is in the output once."""

from __future__ import annotations

import asyncio
from collections import deque
from collections.abc import AsyncGenerator, AsyncIterator
from typing import NamedTuple

from app.db.engine import Database
from app.db.models import BatchChunk
from app.db.repositories.chunks import ChunkRepository, unpack_line_nos
from app.pipeline.chunk_lines import chunk_bytes, decode
from app.storage.base import BlobStore

# One chunk blob per checkpoint write (FLUSH_ROWS lines or a second's worth): few blobs, and a
# shard's chunks (at most shard_lines lines) are read into memory together at finalize.
BLOB_PREFIX = "chunk-"


class FinishedLine(NamedTuple):
    line_no: int
    ok: bool
    line: bytes


# Shards whose chunks are read while an earlier one is written out: each chunk is one blob read
# (a round trip on S3), so reading them one after another would set finalize's pace.
READ_AHEAD_SHARDS = 4


async def finished_shards(
    db: Database, store: BlobStore, batch_id: str, project: str
) -> AsyncGenerator[tuple[int, list[FinishedLine]], None]:
    """(shard_no, its recorded lines in line order) for every shard with a chunk, in shard
    order, holding a few shards' lines at a time."""
    pending: deque[tuple[int, asyncio.Task[list[FinishedLine]]]] = deque()
    try:
        async with db.read() as session:
            async for shard in _by_shard(ChunkRepository(session).of_batch(batch_id)):
                pending.append((shard[0].shard_no, asyncio.create_task(_lines_of_shard(store, project, shard))))
                if len(pending) > READ_AHEAD_SHARDS:
                    shard_no, task = pending.popleft()
                    yield shard_no, await task
        while pending:
            shard_no, task = pending.popleft()
            yield shard_no, await task
    finally:
        for _, task in pending:
            task.cancel()


async def _by_shard(chunks: AsyncIterator[BatchChunk]) -> AsyncIterator[list[BatchChunk]]:
    shard: list[BatchChunk] = []
    async for chunk in chunks:
        if shard and chunk.shard_no != shard[0].shard_no:
            yield shard
            shard = []
        shard.append(chunk)
    if shard:
        yield shard


async def _lines_of_shard(store: BlobStore, project: str, chunks: list[BatchChunk]) -> list[FinishedLine]:
    blobs = await asyncio.gather(*(chunk_bytes(store, project, chunk) for chunk in chunks))
    lines: dict[int, FinishedLine] = {}
    for chunk, data in zip(chunks, blobs, strict=True):
        for line_no, ok, line in decode(data, set(unpack_line_nos(chunk.line_nos))):
            lines[line_no] = FinishedLine(line_no, ok, line)
    return [lines[line_no] for line_no in sorted(lines)]
