"""The lines of a checkpoint chunk's blob: `<line_no> <ok 0|1> <output or error line>`.

Written by the worker's checkpoint and by finalize (the error lines of lines that never ran),
read by finalize and by the results endpoint. A blob can hold a line its row does not count (a
write retried after a commit whose answer was lost): readers keep only the counted ones."""

from __future__ import annotations

from collections.abc import Iterator, Sequence

from app.db.models import BatchChunk
from app.db.repositories.batches import LineRow
from app.storage.base import BlobStore


def encode_line(line_no: int, ok: bool, line: bytes) -> bytes:
    return b"%d %d %s\n" % (line_no, ok, line)


def encode(rows: Sequence[LineRow]) -> bytes:
    return b"".join(encode_line(r.line_no, r.ok, r.line.encode()) for r in rows)


def decode(data: bytes, counted: set[int]) -> Iterator[tuple[int, bool, bytes]]:
    """(line_no, ok, line) of every counted line in `data`, in the blob's order."""
    for raw in data.split(b"\n"):
        if not raw:
            continue
        number, ok, line = raw.split(b" ", 2)
        line_no = int(number)
        if line_no in counted:
            yield line_no, ok == b"1", line


async def chunk_bytes(store: BlobStore, project: str, chunk: BatchChunk) -> bytes:
    """The chunk's blob, whole (a chunk is a checkpoint write: at most a few hundred lines)."""
    if chunk.blob_id is None:  # carried over from the per-line rows (migration 0015)
        return chunk.payload or b""
    return b"".join([part async for part in store.read(project, chunk.blob_id)])
