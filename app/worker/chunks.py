"""The checkpoint chunk: finished lines of one shard, stored together as one blob.

Each line of the blob is `<line_no> <ok 0|1> <output or error line>`; the chunk's database row
lists the line numbers it counts. A blob can hold a line its row does
not count (a write retried after a commit whose answer was lost): readers keep only the counted
ones, so every line is in the output once."""

from __future__ import annotations

from collections.abc import AsyncGenerator, Iterator, Sequence
from typing import NamedTuple

from app.db.engine import Database
from app.db.models import BatchChunk
from app.db.repositories.batches import LineRow
from app.db.repositories.chunks import ChunkRepository, unpack_line_nos
from app.storage.base import BlobStore

# One chunk blob per checkpoint write (FLUSH_ROWS lines or a second's worth): few blobs, and a
# shard's chunks (at most shard_lines lines) are read into memory together at finalize.
BLOB_PREFIX = "chunk-"


def encode(rows: Sequence[LineRow]) -> bytes:
    return b"".join(b"%d %d %s\n" % (r.line_no, r.ok, r.line.encode()) for r in rows)


def decode(data: bytes, counted: set[int]) -> Iterator[tuple[int, bool, bytes]]:
    """(line_no, ok, line) of every counted line in `data`."""
    for raw in data.split(b"\n"):
        if not raw:
            continue
        line_no, ok, line = raw.split(b" ", 2)
        if int(line_no) in counted:
            yield int(line_no), ok == b"1", line


class FinishedLine(NamedTuple):
    line_no: int
    ok: bool
    line: bytes


async def finished_lines(
    db: Database, store: BlobStore, batch_id: str, project: str
) -> AsyncGenerator[FinishedLine, None]:
    """Every recorded line of the batch in line order, holding one shard's lines at a time."""
    async with db.read() as session:
        shard: list[BatchChunk] = []
        async for chunk in ChunkRepository(session).of_batch(batch_id):
            if shard and chunk.shard_no != shard[0].shard_no:
                for line in await _lines_of_shard(store, project, shard):
                    yield line
                shard = []
            shard.append(chunk)
        for line in await _lines_of_shard(store, project, shard):
            yield line


async def _lines_of_shard(store: BlobStore, project: str, chunks: list[BatchChunk]) -> list[FinishedLine]:
    lines: dict[int, FinishedLine] = {}
    for chunk in chunks:
        if chunk.blob_id is None:  # carried over from the per-line rows (migration 0015)
            data = chunk.payload or b""
        else:
            data = b"".join([part async for part in store.read(project, chunk.blob_id)])
        for line_no, ok, line in decode(data, set(unpack_line_nos(chunk.line_nos))):
            lines[line_no] = FinishedLine(line_no, ok, line)
    return [lines[line_no] for line_no in sorted(lines)]
