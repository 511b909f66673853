"""Buffers finished lines and writes them as checkpoint rows in short transactions.

Rows are grouped (up to FLUSH_ROWS, or whatever a periodic flush finds) because each SQLite
commit is an fsync; a crash loses at most the unflushed lines, which simply run again."""

from __future__ import annotations

import asyncio
import time

from app.db.engine import Database
from app.db.repositories.batches import LineRow
from app.db.repositories.shards import ShardClaim, ShardRepository
from app.db.repositories.usage import UsageKey
from app.pipeline.executor import LineOutcome
from app.pipeline.lines import dumps

FLUSH_ROWS = 256


class Checkpoint:
    def __init__(self, db: Database, claim: ShardClaim, usage: UsageKey | None = None) -> None:
        self.db = db
        self.claim = claim
        self.usage = usage
        self._buffer: list[LineRow] = []
        self._lock = asyncio.Lock()

    async def add(self, outcome: LineOutcome) -> None:
        u = outcome.usage
        self._buffer.append(
            LineRow(
                outcome.line_no,
                outcome.ok,
                dumps(outcome.record),
                u.input_tokens,
                u.cached_tokens,
                u.output_tokens,
                u.reasoning_tokens,
            )
        )
        if len(self._buffer) >= FLUSH_ROWS:
            await self.flush()

    async def flush(self) -> None:
        async with self._lock:
            rows, self._buffer = self._buffer, []
            if not rows:
                return
            try:
                async with self.db.write() as session:
                    await ShardRepository(session).record_lines(self.claim, rows, self.usage, time.time())
            except BaseException:
                # Interrupted (e.g. the flushing task was cancelled): keep the rows for the next
                # flush. Rows that did commit are skipped then by ON CONFLICT DO NOTHING.
                self._buffer[:0] = rows
                raise
