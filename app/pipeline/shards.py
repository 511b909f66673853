"""Cutting a batch's input into shards: every `shard_lines` requests, at the byte offset of the
shard's first request line, so a replica can read just its shard (a ranged read)."""

from __future__ import annotations

from collections.abc import AsyncIterator, Sequence

import numpy as np

from app.db.repositories.shards import ShardSpan
from app.pipeline.jsonl import split_lines_at


class ShardCutter:
    """Fed every request line (blank lines skipped) in order; `spans()` are the shards."""

    def __init__(self, shard_lines: int) -> None:
        self.shard_lines = shard_lines
        self._starts: list[tuple[int, int]] = []  # (first line, byte offset)
        self._requests = 0
        self._last_line = 0

    def add(self, line_no: int, offset: int) -> None:
        if self._requests % self.shard_lines == 0:
            self._starts.append((line_no, offset))
        self._requests += 1
        self._last_line = line_no

    def add_run(self, first_line_no: int, offsets: Sequence[int] | np.ndarray) -> None:
        """`add` of consecutive request lines (no blank line between them) at `offsets`."""
        for i in range((-self._requests) % self.shard_lines, len(offsets), self.shard_lines):
            self._starts.append((first_line_no + i, int(offsets[i])))
        self._requests += len(offsets)
        if len(offsets):
            self._last_line = first_line_no + len(offsets) - 1

    def spans(self) -> list[ShardSpan]:
        spans = []
        for i, (first_line, start) in enumerate(self._starts):
            last = i == len(self._starts) - 1
            spans.append(
                ShardSpan(
                    first_line=first_line,
                    end_line=self._last_line + 1 if last else self._starts[i + 1][0],
                    start_offset=start,
                    end_offset=None if last else self._starts[i + 1][1],
                    lines=self._requests - i * self.shard_lines if last else self.shard_lines,
                )
            )
        return spans


async def cut_shards(chunks: AsyncIterator[bytes], shard_lines: int) -> list[ShardSpan]:
    """Shards of an already validated input (a batch that started before shards existed)."""
    cutter = ShardCutter(shard_lines)
    async for line_no, offset, raw in split_lines_at(chunks):
        if raw.strip():
            cutter.add(line_no, offset)
    return cutter.spans()
