"""A batch's results as they come (batchd's, beside OpenAI's contract): the output and error
lines finished so far, read from the checkpoint chunks, so any replica serves them and memory
stays flat (a chunk at a time). Finalize keeps the chunks and adds one for the lines that never
ran (app/worker/finalize.py): before and after the end, the chunks hold what the files do.

A batch's chunk ids grow in the order they commit (app/db/repositories/shards.py), so a read
covers the chunks up to the newest one at its start, and a cursor is a position in that
sequence: a chunk id and how many of that chunk's lines were read."""

from __future__ import annotations

import base64
import binascii
from collections.abc import AsyncIterator
from dataclasses import dataclass

from sqlalchemy.ext.asyncio import AsyncSession

from app.core import jsonbody
from app.core.chunk_format import decode, unpack_line_nos
from app.core.errors import InvalidRequest, InvalidValue
from app.core.statuses import TERMINAL_BATCH_STATUSES, LineOutcome
from app.db.engine import Database
from app.db.repositories.batches import BatchRepository
from app.db.repositories.chunks import ChunkRepository
from app.db.unit_of_work import after_commit
from app.domains.lookup import BATCH, get_or_404
from app.pipeline.chunk_blobs import chunk_bytes
from app.pipeline.lines import ResultLine
from app.storage.base import BlobStore

RESULT_STATUSES = (LineOutcome.COMPLETED, LineOutcome.FAILED)
# Chunk rows fetched per short read transaction (none is held open while the response streams).
CHUNK_PAGE = 32
# Chunk ids are a 32-bit integer column: a larger one in a cursor is not a cursor of ours.
MAX_CHUNK_ID = 2**31 - 1
# Lines joined into one piece of the response body.
FLUSH_BYTES = 64 * 1024


@dataclass(frozen=True, order=True)
class Position:
    """Everything before chunk `chunk_id`, and that chunk's first `lines` lines (blob order)."""

    chunk_id: int
    lines: int


@dataclass(frozen=True)
class ResultsQuery:
    status: str | None = None
    custom_id: str | None = None
    limit: int | None = None
    after: str | None = None


@dataclass
class ResultsRead:
    """One read: its lines (streamed), the cursor that continues after them, and whether the
    batch was still running when the read began."""

    lines: AsyncIterator[bytes]
    cursor: str
    incomplete: bool


def encode_cursor(batch_id: str, position: Position) -> str:
    raw = f"{batch_id}:{position.chunk_id}:{position.lines}".encode()
    return base64.urlsafe_b64encode(raw).decode().rstrip("=")


def decode_cursor(batch_id: str, cursor: str) -> Position:
    """The position a cursor names; 400 for one that is not a cursor of this batch."""
    try:
        raw = base64.urlsafe_b64decode(cursor + "=" * (-len(cursor) % 4)).decode()
        owner, chunk_id, lines = raw.rsplit(":", 2)
        position = Position(int(chunk_id), int(lines))
    except (ValueError, binascii.Error, UnicodeDecodeError):
        raise InvalidRequest(
            f"Invalid 'after': '{cursor}' is not a results cursor.", param="after", code="invalid_cursor"
        ) from None
    if owner != batch_id or not (0 <= position.chunk_id <= MAX_CHUNK_ID + 1 and 0 <= position.lines <= MAX_CHUNK_ID):
        raise InvalidRequest(
            f"Invalid 'after': the cursor is not one of batch {batch_id}'s results.",
            param="after",
            code="invalid_cursor",
        )
    return position


async def delete_results(session: AsyncSession, store: BlobStore, project: str, batch_id: str) -> None:
    """Delete a batch's chunks with the request's unit of work (their blobs once it commits)."""
    blob_ids = await ChunkRepository(session).delete_of_batch(batch_id)

    async def delete_blobs() -> None:
        for blob_id in blob_ids:
            await store.delete(project, blob_id)

    after_commit(session, delete_blobs)


class BatchResultsService:
    def __init__(self, session: AsyncSession, db: Database, store: BlobStore) -> None:
        self.session = session
        self.db = db
        self.store = store

    async def read(self, project: str, batch_id: str, query: ResultsQuery) -> ResultsRead:
        if query.status is not None and query.status not in RESULT_STATUSES:
            raise InvalidValue("status", query.status, RESULT_STATUSES)
        batch = await get_or_404(BatchRepository(self.session), project, batch_id, BATCH)
        start = decode_cursor(batch.id, query.after) if query.after is not None else Position(0, 0)
        incomplete = batch.status not in TERMINAL_BATCH_STATUSES
        # Read after the batch row: a read that sees the batch ended sees every chunk.
        newest = await ChunkRepository(self.session).last_id(batch.id)
        scan = _Scan(self.db, self.store, project, batch.id, query, newest)
        limit = 1 if query.custom_id is not None else query.limit  # a custom_id is on one line only
        end = Position(newest + 1, 0)
        if limit is not None:  # where the limit-th line ends, so the cursor goes out before the lines
            async for position, _ in scan.matching(start, end, limit):
                end = position
        return ResultsRead(scan.body(start, end), encode_cursor(batch.id, max(start, end)), incomplete)


class _Scan:
    """The lines of a batch's chunks up to chunk `newest` that a query asks for."""

    def __init__(
        self, db: Database, store: BlobStore, project: str, batch_id: str, query: ResultsQuery, newest: int
    ) -> None:
        self.db = db
        self.store = store
        self.project = project
        self.batch_id = batch_id
        self.newest = newest
        self.ok = None if query.status is None else query.status == LineOutcome.COMPLETED
        self.custom_id = query.custom_id
        # The custom_id as the line spells it (compact JSON), to parse only lines that have it
        self.needle = None if query.custom_id is None else jsonbody.dumps(query.custom_id)[1:-1].encode()

    async def matching(
        self, start: Position, end: Position, limit: int | None = None
    ) -> AsyncIterator[tuple[Position, bytes]]:
        """(position after the line, line) of the asked-for lines between `start` and `end`."""
        found = 0
        async for position, ok, line in self._lines(start, end):
            if self.ok is not None and ok != self.ok:
                continue
            if self.needle is not None and not self._has_custom_id(line):
                continue
            yield position, line
            found += 1
            if limit is not None and found >= limit:
                return

    async def body(self, start: Position, end: Position) -> AsyncIterator[bytes]:
        piece: list[bytes] = []
        size = 0
        async for _, line in self.matching(start, end):
            piece.append(line + b"\n")
            size += len(line) + 1
            if size >= FLUSH_BYTES:
                yield b"".join(piece)
                piece, size = [], 0
        if piece:
            yield b"".join(piece)

    def _has_custom_id(self, line: bytes) -> bool:
        assert self.needle is not None
        return self.needle in line and ResultLine.read(line).custom_id == self.custom_id

    async def _lines(self, start: Position, end: Position) -> AsyncIterator[tuple[Position, bool, bytes]]:
        after_id = start.chunk_id - 1
        while after_id < min(end.chunk_id, self.newest):
            async with self.db.read() as session:
                chunks = await ChunkRepository(session).page(
                    self.batch_id, after_id, min(end.chunk_id, self.newest), CHUNK_PAGE
                )
            if not chunks:
                return
            for chunk in chunks:
                data = await chunk_bytes(self.store, self.project, chunk)
                counted = set(unpack_line_nos(chunk.line_nos))
                for index, (_, ok, line) in enumerate(decode(data, counted)):
                    position = Position(chunk.id, index + 1)
                    if position > end:
                        return
                    if position > start:
                        yield position, ok, line
            after_id = chunks[-1].id
