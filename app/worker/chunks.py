"""The checkpoint chunk: finished lines of one shard, stored together as one blob (its
format: app/core/chunk_format.py); the chunk's database row lists the line numbers it counts,
so every line is in the output once."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncGenerator, AsyncIterator, Iterator, Sequence
from contextlib import aclosing
from typing import NamedTuple

import numpy as np

from app.core.chunk_format import decode, decode_columns, unpack_line_nos
from app.db.engine import Database
from app.db.models import BatchChunk
from app.db.repositories.chunks import ChunkRepository
from app.pipeline.chunk_blobs import chunk_bytes
from app.pipeline.read_ahead import read_ahead
from app.storage.base import BlobStore


class FinishedLine(NamedTuple):
    line_no: int
    ok: bool
    line: bytes


class ShardLines:
    """A shard's recorded lines in line order, as spans of its chunks' blobs (joined): finalize
    writes a shard whose every line ran as two joins, with no Python a line but a slice."""

    def __init__(self, data: bytes, line_nos: np.ndarray, ok: np.ndarray, starts: np.ndarray, ends: np.ndarray):
        self.data = data
        self.line_nos, self.ok, self.starts, self.ends = line_nos, ok, starts, ends

    @classmethod
    def of_blobs(cls, blobs: Sequence[tuple[bytes, Sequence[int]]]) -> ShardLines:
        """The counted lines of (blob, line numbers its chunk counts), in line order; a line in
        more than one place (never written so) is read from the last, as a dict would keep it."""
        # Read as one blob: numpy's cost is per call (a shard has several chunks when its run was slow).
        data = b"".join(blob for blob, _ in blobs)
        whole = all(blob.endswith(b"\n") for blob, _ in blobs if blob)
        columns = decode_columns(data) if whole else None
        if columns is None:
            return cls.of_lines(_lines_one_by_one(blobs))
        keep = []
        first = 0
        # Where each blob's lines end among the lines: at its last byte.
        bounds = np.searchsorted(columns.ends, np.cumsum([len(blob) for blob, _ in blobs]), side="right")
        for (_, counted), end in zip(blobs, bounds.tolist(), strict=True):
            numbers, wanted = columns.line_nos[first:end], np.asarray(counted)
            # Mostly the chunk counts every line of its blob, in the blob's order.
            same = numbers.size == wanted.size and bool(np.all(numbers == wanted))
            keep.append(np.ones(numbers.size, bool) if same else np.isin(numbers, wanted))
            first = end
        kept = np.flatnonzero(np.concatenate(keep)) if keep else np.zeros(0, np.int64)
        order = kept[np.argsort(columns.line_nos[kept], kind="stable")]
        ranked = columns.line_nos[order]
        order = order[np.append(ranked[1:] != ranked[:-1], True)] if order.size else order
        return cls(data, columns.line_nos[order], columns.ok[order], columns.starts[order], columns.ends[order])

    @classmethod
    def of_lines(cls, lines: Sequence[FinishedLine]) -> ShardLines:
        """From lines already in line order."""
        sizes = np.array([len(line.line) + 1 for line in lines], np.int64)
        ends = np.cumsum(sizes)
        return cls(
            b"".join(line.line + b"\n" for line in lines),
            np.array([line.line_no for line in lines], np.int64),
            np.array([line.ok for line in lines], bool),
            ends - sizes,
            ends,
        )

    def __len__(self) -> int:
        return len(self.line_nos)

    def __iter__(self) -> Iterator[FinishedLine]:
        data = self.data
        for line_no, ok, start, end in zip(
            self.line_nos.tolist(), self.ok.tolist(), self.starts.tolist(), self.ends.tolist(), strict=True
        ):
            yield FinishedLine(line_no, ok, data[start : end - 1])

    def files(self) -> tuple[bytes, bytes]:
        """The output lines and the error lines, each with its newline, in line order."""
        view = memoryview(self.data)
        return tuple(  # type: ignore[return-value]
            b"".join(map(view.__getitem__, map(slice, self.starts[mask].tolist(), self.ends[mask].tolist())))
            for mask in (self.ok, ~self.ok)
        )


NO_LINES = ShardLines.of_lines([])


def _lines_one_by_one(blobs: Sequence[tuple[bytes, Sequence[int]]]) -> list[FinishedLine]:
    lines: dict[int, FinishedLine] = {}
    for data, counted in blobs:
        for line_no, ok, line in decode(data, set(counted)):
            lines[line_no] = FinishedLine(line_no, ok, line)
    return [lines[line_no] for line_no in sorted(lines)]


# Shards whose chunks are read while an earlier one is written out: each chunk is one blob read
# (a round trip on S3, ~1 ms of botocore's CPU and a wait for the store), so reading them one
# after another would set finalize's pace; a shard's lines are ~0.3 MB in W9.
READ_AHEAD_SHARDS = 8


async def finished_shards(
    db: Database, store: BlobStore, batch_id: str, project: str
) -> AsyncGenerator[tuple[int, ShardLines], None]:
    """(shard_no, its recorded lines in line order) for every shard with a chunk, in shard
    order, holding a few shards' lines at a time."""
    async with db.read() as session:
        shards = _by_shard(ChunkRepository(session).of_batch(batch_id))
        async with aclosing(
            read_ahead(shards, lambda shard: _lines_of_shard(store, project, shard), READ_AHEAD_SHARDS)
        ) as lines:
            async for shard, shard_lines in lines:
                yield shard[0].shard_no, shard_lines


async def _by_shard(chunks: AsyncIterator[BatchChunk]) -> AsyncIterator[list[BatchChunk]]:
    shard: list[BatchChunk] = []
    async for chunk in chunks:
        if shard and chunk.shard_no != shard[0].shard_no:
            yield shard
            shard = []
        shard.append(chunk)
    if shard:
        yield shard


async def _lines_of_shard(store: BlobStore, project: str, chunks: list[BatchChunk]) -> ShardLines:
    blobs = await asyncio.gather(*(chunk_bytes(store, project, chunk) for chunk in chunks))
    return ShardLines.of_blobs([(data, unpack_line_nos(c.line_nos)) for c, data in zip(chunks, blobs, strict=True)])
