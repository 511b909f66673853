"""The output and error files of a prefix-ordered batch in input order (`output_order: "input"`).

Such a batch runs from its prefix-ordered copy (app/worker/ordered_input.py) like any other, and
the copy is written with a sidecar blob of positions: the input line number of every copied line,
4 bytes each, in copy order. Finalize reads the positions beside the shards (a shard is a run of
consecutive copy lines), sorts each shard's result lines by input position (a shard's worth in
memory), spools each sorted shard as a run to a local temporary file, and merges the runs
(heapq.merge) into the files: the merge holds one line of each run and reads each run through
a buffer of its own, so memory is a buffer a shard, not the file."""

from __future__ import annotations

import heapq
import os
import struct
import tempfile
from collections.abc import AsyncIterator, Iterable, Iterator
from operator import itemgetter
from pathlib import Path
from typing import BinaryIO

import numpy as np

# (input line number, ok, line): a result line placed at its input position
PlacedLine = tuple[int, bool, bytes]

POSITION_BYTES = 4
_POSITION = np.dtype("<u4")
# A spooled line: its input line number, whether it is an output line, its length; then its bytes.
_RECORD = struct.Struct("<IBI")
# What each run's reader holds while the runs are merged (a 1,000-run merge holds 16 MB).
RUN_BUFFER_BYTES = 16 * 1024


def positions_id(ordered_input: str) -> str:
    """The positions blob beside the ordered copy `ordered_input` (kept and deleted with it)."""
    return f"{ordered_input}-positions"


def pack_positions(line_nos: Iterable[int]) -> bytes:
    return np.fromiter(line_nos, dtype=_POSITION).tobytes()


class Positions:
    """The input line numbers of an ordered copy's lines, taken shard by shard in copy order from
    one streamed read of the positions blob (a buffer of the store's chunks, not the blob)."""

    def __init__(self, chunks: AsyncIterator[bytes]) -> None:
        self._chunks = chunks
        self._buffer = bytearray()
        self._next_line = 1  # the copy line the buffer starts at

    async def take(self, first_line: int, count: int) -> np.ndarray:
        """The input line numbers of copy lines first_line .. first_line + count - 1."""
        if first_line != self._next_line:
            raise ValueError(f"shards out of copy order: line {first_line}, expected {self._next_line}")
        need = count * POSITION_BYTES
        while len(self._buffer) < need:
            chunk = await anext(self._chunks, None)
            if chunk is None:
                raise ValueError(f"the positions end before copy line {first_line + count - 1}")
            self._buffer += chunk
        taken = np.frombuffer(bytes(self._buffer[:need]), dtype=_POSITION).astype(np.int64)
        del self._buffer[:need]
        self._next_line += count
        return taken

    async def aclose(self) -> None:
        aclose = getattr(self._chunks, "aclose", None)
        if aclose is not None:
            await aclose()


class SortedRuns:
    """Runs of placed lines spooled to a local temporary file, each sorted by input position;
    `merged()` yields every line of every run in input order."""

    def __init__(self, spool_dir: Path | None = None) -> None:
        self._file: BinaryIO = tempfile.TemporaryFile(dir=spool_dir, prefix="batchd-runs-")
        self._runs: list[tuple[int, int]] = []  # (start, end) byte offsets in the file

    def __len__(self) -> int:
        return len(self._runs)

    def add_run(self, lines: list[PlacedLine]) -> None:
        """Spool one shard's lines (in any order; sorted here, a shard's worth in memory)."""
        if not lines:
            return
        lines.sort(key=itemgetter(0))
        start = self._file.tell()
        self._file.write(b"".join(_RECORD.pack(at, ok, len(line)) + line for at, ok, line in lines))
        self._runs.append((start, self._file.tell()))

    def merged(self, buffer_bytes: int = RUN_BUFFER_BYTES) -> Iterator[PlacedLine]:
        self._file.flush()
        fd = self._file.fileno()
        return merge_runs([read_run(fd, start, end, buffer_bytes) for start, end in self._runs])

    def close(self) -> None:
        self._file.close()


def merge_runs(runs: Iterable[Iterator[PlacedLine]]) -> Iterator[PlacedLine]:
    """A k-way merge of runs each in input order: one line of each run is held at a time. No key
    function (a call a line): the tuples compare by position first, and positions are unique."""
    return heapq.merge(*runs)


def read_run(fd: int, start: int, end: int, buffer_bytes: int = RUN_BUFFER_BYTES) -> Iterator[PlacedLine]:
    """The lines spooled in bytes start..end of `fd`, read `buffer_bytes` at a time (more only for
    a line longer than that)."""
    buffer, at, position = b"", 0, start

    def refill(size: int) -> None:
        nonlocal buffer, at, position
        data = os.pread(fd, min(size, end - position), position)
        if not data:
            raise ValueError("a spooled run ends inside a line")
        buffer, at, position = buffer[at:] + data, 0, position + len(data)

    while at < len(buffer) or position < end:
        if len(buffer) - at < _RECORD.size:
            refill(buffer_bytes)
        line_no, ok, size = _RECORD.unpack_from(buffer, at)
        stop = at + _RECORD.size + size
        if stop > len(buffer):
            refill(max(buffer_bytes, stop - len(buffer)))  # the rest of a long line
            stop = at + _RECORD.size + size
        yield line_no, bool(ok), buffer[at + _RECORD.size : stop]
        at = stop
