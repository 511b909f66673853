"""Buffers finished lines and writes them as checkpoint chunks: the lines' results as one blob,
then a short transaction recording the chunk and the counters (app/worker/chunks.py).

Lines are grouped (up to FLUSH_ROWS or FLUSH_BYTES, or whatever a periodic flush finds) because
each commit is an fsync; a crash loses at most the unflushed lines, which simply run again. A
write is a blob and a transaction of four statements (about 2.5 ms of a replica's CPU in W8): a
shard's 1,000 lines (the default shard_lines) fit one write, its last, which also marks the shard
done, unless they hold more than FLUSH_BYTES of results or run longer than the monitor's second.

A full buffer is written by a task of its own: the line that filled it does not wait for the
commit, so its slot in the executor's window refills at once (waiting held up to the whole
window behind every fsync: W8 found a replica idle half the time in front of a fast fleet).
Past MAX_BUFFERED rows (or MAX_BUFFERED_BYTES) a line does wait, so memory stays bounded when
the database is slow."""

from __future__ import annotations

import asyncio
import time

from app.core.chunk_format import encode, new_blob_id
from app.db.engine import Database
from app.db.repositories.batches import BatchRepository, LineRow
from app.db.repositories.shards import ShardClaim, ShardRepository
from app.db.repositories.usage import UsageKey
from app.pipeline.executor import LineOutcome
from app.pipeline.lines import dumps
from app.storage.base import BlobStore

FLUSH_ROWS = 1024
FLUSH_BYTES = 4 * 1024 * 1024
MAX_BUFFERED = 4 * FLUSH_ROWS
MAX_BUFFERED_BYTES = 4 * FLUSH_BYTES


class Checkpoint:
    def __init__(
        self,
        db: Database,
        store: BlobStore,
        project: str,
        claim: ShardClaim,
        usage: UsageKey | None = None,
        recorded: set[int] | None = None,
    ) -> None:
        self.db = db
        self.store = store
        self.project = project
        self.claim = claim
        self.usage = usage
        # The shard's recorded line numbers (read after the claim, plus what this run committed),
        # so a write need not read them back; None once a write's outcome is unknown: read then.
        self._recorded = recorded
        self._buffer: list[LineRow] = []
        self._buffered_bytes = 0  # of the buffered rows' results
        self._lock = asyncio.Lock()
        self._background: asyncio.Task | None = None
        # Whether the write that marked the shard done also moved the batch on to finalizing
        # (None: that write did not try; the caller does, in a transaction of its own).
        self.finished_batch: bool | None = None

    async def add(self, outcome: LineOutcome) -> None:
        u = outcome.usage
        line = dumps(outcome.record)
        self._buffered_bytes += len(line)
        self._buffer.append(
            LineRow(
                outcome.line_no,
                outcome.ok,
                line,
                u.input_tokens,
                u.cached_tokens,
                u.output_tokens,
                u.reasoning_tokens,
                outcome.model,
                u.seconds,
            )
        )
        background = self._background
        if background is not None and background.done():
            self._background = None
            background.result()  # a failed write (LeaseLost) stops the run, as before
        rows, size = len(self._buffer), self._buffered_bytes
        if rows >= MAX_BUFFERED or size >= MAX_BUFFERED_BYTES:
            await self.flush()
        elif (rows >= FLUSH_ROWS or size >= FLUSH_BYTES) and self._background is None:
            self._background = asyncio.create_task(self._write())

    async def flush(self, finish: bool = False) -> bool:
        """Write every buffered row (after the write already under way); raises what either raised.
        With `finish` (the run has read and run every line it had), the write that leaves every
        line of the shard recorded also marks the shard done; True if it did."""
        background, self._background = self._background, None
        if background is not None:
            await background
        return await self._write(finish)

    def _completes_shard(self, rows: list[LineRow]) -> bool:
        recorded = self._recorded
        if recorded is None:  # unknown after a write of unknown outcome: the caller counts
            return False
        return len(recorded.union(row.line_no for row in rows)) >= self.claim.lines

    async def _write(self, finish: bool = False) -> bool:
        async with self._lock:
            rows, self._buffer, size, self._buffered_bytes = self._buffer, [], self._buffered_bytes, 0
            done_at = time.time() if finish and self._completes_shard(rows) else None
            if not rows:
                if done_at is None:
                    return False
                async with self.db.write() as session:
                    await ShardRepository(session).mark_done(self.claim, done_at)
                return True
            blob_id = new_blob_id()
            try:
                writer = self.store.new_writer(self.project, blob_id)
                writer.write(encode(rows))
                await writer.drain()
                await self.store.commit(writer, self.project, blob_id)
                recorded = self._recorded
                async with self.db.write() as session:
                    new = await ShardRepository(session).record_lines(
                        self.claim, rows, blob_id, self.usage, time.time(), recorded, done_at
                    )
                    if done_at is not None and new:
                        # The batch row's counters were just updated, and its lock is held to the
                        # commit: of two replicas ending a batch's last two shards at once, the
                        # later one's check runs after the earlier one committed and sees both
                        # done (Postgres reads committed rows a statement; SQLite has one writer).
                        batches = BatchRepository(session)
                        self.finished_batch = await batches.finish_running(self.claim.batch_id, int(done_at))
            except BaseException:
                # Interrupted (e.g. the flushing task was cancelled): keep the rows for the next
                # flush, which leaves out lines that did commit. The blob stays: whether its chunk
                # committed is unknown here, and the blob sweep removes it if not.
                self._buffer[:0] = rows
                self._buffered_bytes += size
                self._recorded = None
                raise
            if recorded is not None:
                recorded.update(row.line_no for row in rows)  # committed: each is recorded now
            if not new:  # every line was recorded already: no chunk names the blob
                await self.store.delete(self.project, blob_id)
            return done_at is not None
