"""The checkpoint chunk's format, in one place: a chunk is one blob of finished lines, framed
`<line_no> <ok 0|1> <output or error line>\n`, and a database row (app/db/repositories/chunks.py)
whose index lists the line numbers it counts, packed as uint32 little-endian.

Written by the worker's checkpoint and by finalize (the error lines of lines that never ran),
read by finalize and by the results endpoint. A blob can hold a line its row does not count (a
write retried after a commit whose answer was lost): readers keep only the counted ones."""

from __future__ import annotations

import sys
import uuid
from array import array
from collections.abc import Iterable, Iterator, Sequence
from dataclasses import dataclass
from typing import Protocol

import numpy as np

# One chunk blob per checkpoint write (FLUSH_ROWS lines or a second's worth): few blobs, and a
# shard's chunks (at most shard_lines lines) are read into memory together at finalize.
BLOB_PREFIX = "chunk-"
# The shard number of the chunk of the lines that never ran (written once the batch has ended)
NEVER_RAN_SHARD = -1


def new_blob_id() -> str:
    """A fresh chunk blob's id (a retried write gets another: the row names the one it counts)."""
    return f"{BLOB_PREFIX}{uuid.uuid4().hex}"


def pack_line_nos(line_nos: Iterable[int]) -> bytes:
    """A chunk's line numbers as its row stores them: uint32, little-endian."""
    packed = array("I", line_nos)
    if sys.byteorder == "big":
        packed.byteswap()
    return packed.tobytes()


def unpack_line_nos(data: bytes) -> array:
    packed = array("I")
    packed.frombytes(data)
    if sys.byteorder == "big":
        packed.byteswap()
    return packed


class FinishedRow(Protocol):
    """A finished line as the worker records it (app/db/repositories/batches.LineRow)."""

    line_no: int
    ok: bool
    line: str


def encode_line(line_no: int, ok: bool, line: bytes) -> bytes:
    return b"%d %d %s\n" % (line_no, ok, line)


def encode(rows: Sequence[FinishedRow]) -> bytes:
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


@dataclass(frozen=True)
class ChunkColumns:
    """Every line of a blob (counted or not), as arrays: its number, whether it ran ok, and where
    its output or error line (with the newline after it) lies in the blob."""

    line_nos: np.ndarray
    ok: np.ndarray
    starts: np.ndarray
    ends: np.ndarray


_MAX_DIGITS = 10  # a uint32 line number


def decode_columns(data: bytes) -> ChunkColumns | None:
    """`decode`'s reading of a whole blob in a few numpy passes (finalize reads a million lines
    so); None for a blob that is off the format as encode writes it (decode then reads it)."""
    if not data.endswith(b"\n"):
        none = np.zeros(0, np.int64)
        return None if data else ChunkColumns(none, none.astype(bool), none, none)
    buf = np.frombuffer(data, np.uint8)
    ends = np.flatnonzero(buf == ord("\n")) + 1
    starts = np.concatenate(([0], ends[:-1]))
    # Each line's first bytes, side by side: its number, a space, the ok digit and a space.
    heads = buf[np.minimum(starts[:, None] + np.arange(_MAX_DIGITS + 3), len(buf) - 1)].astype(np.int64)
    width = np.argmax(heads == ord(" "), axis=1)  # the number's digits (0 when no space: refused below)
    if np.any((width < 1) | (width > _MAX_DIGITS) | (starts + width + 3 > ends)):
        return None
    rows = np.arange(starts.size)
    digits = heads[:, :_MAX_DIGITS] - ord("0")
    inside = np.arange(_MAX_DIGITS) < width[:, None]
    if np.any(inside & ((digits < 0) | (digits > 9))) or np.any(heads[rows, width + 2] != ord(" ")):
        return None
    # Digit d of a w-digit number is worth 10^(w-1-d).
    powers = np.where(inside, 10 ** np.maximum(width[:, None] - 1 - np.arange(_MAX_DIGITS), 0), 0)
    line_nos = (np.where(inside, digits, 0) * powers).sum(axis=1)
    return ChunkColumns(line_nos, heads[rows, width + 1] == ord("1"), starts + width + 3, ends)
