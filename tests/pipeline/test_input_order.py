"""Putting a prefix-ordered batch's result lines back in input order (app/pipeline/input_order.py):
shards' lines spooled as sorted runs and merged, holding one line and one read buffer a run; the
copy's positions read shard by shard from a stream."""

from __future__ import annotations

import asyncio
import os
import random
from collections.abc import AsyncIterator, Iterator

import pytest

from app.pipeline import input_order
from app.pipeline.input_order import PlacedLine, Positions, SortedRuns, merge_runs, pack_positions


def test_the_merge_holds_one_line_a_run():
    """However long the runs, the merge has pulled at most one line more from each run than it has
    given out: its memory is a line a run, not the runs."""
    pulled = [0, 0, 0]
    given = 0

    def run(n: int, positions: range) -> Iterator[PlacedLine]:
        for at in positions:
            pulled[n] += 1
            yield at, True, b"x"

    runs = [run(0, range(1, 3000, 3)), run(1, range(2, 3000, 3)), run(2, range(3, 3000, 3))]
    merged = []
    for line in merge_runs(runs):
        given += 1
        assert sum(pulled) - given <= len(runs)
        merged.append(line[0])
    assert merged == list(range(1, 3000))


def test_sorted_runs_merge_in_input_order_through_small_buffers(tmp_path, monkeypatch):
    """Shards' lines in any order come back by input position, ok flags and bytes intact, each
    run read a small buffer at a time (more only for a line longer than it)."""
    rng = random.Random(57)
    positions = list(range(1, 501))
    rng.shuffle(positions)
    lines = {at: (at % 3 != 0, (b"line %d " % at) * rng.randint(1, 40)) for at in positions}
    reads: list[int] = []
    real_pread = os.pread

    def pread(fd: int, size: int, offset: int) -> bytes:
        reads.append(size)
        return real_pread(fd, size, offset)

    monkeypatch.setattr(input_order.os, "pread", pread)
    runs = SortedRuns(tmp_path)
    try:
        for start in range(0, len(positions), 50):  # ten shards of 50 lines, each in run order
            runs.add_run([(at, *lines[at]) for at in positions[start : start + 50]])
        runs.add_run([])  # a shard with no line is no run
        assert len(runs) == 10
        merged = list(runs.merged(buffer_bytes=64))
    finally:
        runs.close()
    assert [at for at, _, _ in merged] == list(range(1, 501))
    assert all((ok, line) == lines[at] for at, ok, line in merged)
    longest = max(len(line) for _, line in lines.values())
    assert max(reads) <= max(64, longest + 9)  # a buffer, or one line and its record header


def test_positions_are_taken_shard_by_shard_across_the_store_s_chunks():
    packed = pack_positions([7, 3, 9, 1, 2, 8, 4])

    async def chunks() -> AsyncIterator[bytes]:
        for start in range(0, len(packed), 5):  # chunk edges inside positions
            yield packed[start : start + 5]

    async def take() -> list[list[int]]:
        positions = Positions(chunks())
        try:
            taken = [(await positions.take(1, 3)).tolist(), (await positions.take(4, 4)).tolist()]
            with pytest.raises(ValueError):
                await positions.take(8, 1)  # past the copy's last line
            return taken
        finally:
            await positions.aclose()

    assert asyncio.run(take()) == [[7, 3, 9], [1, 2, 8, 4]]


def test_positions_refuse_shards_out_of_copy_order():
    async def chunks() -> AsyncIterator[bytes]:
        yield pack_positions([1, 2, 3, 4])

    with pytest.raises(ValueError):
        asyncio.run(Positions(chunks()).take(3, 2))
