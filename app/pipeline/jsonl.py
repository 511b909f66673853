"""Read JSONL line by line without loading it: chunks from any async byte source, split here."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator, Iterator
from dataclasses import dataclass
from typing import BinaryIO

CHUNK_BYTES = 1024 * 1024


@dataclass(frozen=True, slots=True)
class LineBlock:
    """Whole physical lines of a file, together: `data` holds them with their newlines (the
    file's last line may have none); the first starts at `first_offset` and is `first_line_no`."""

    first_line_no: int
    first_offset: int
    data: bytes

    def raw_lines(self) -> list[bytes]:
        """The lines as they are, without their newlines (a CR before one stays)."""
        lines = self.data.split(b"\n")
        if self.data.endswith(b"\n"):
            lines.pop()
        return lines

    def lines(self) -> Iterator[tuple[int, int, bytes]]:
        """(1-based line number, byte offset of the line, line without its newline or CR)."""
        line_no, offset = self.first_line_no, self.first_offset
        for line in self.raw_lines():
            yield line_no, offset, line.rstrip(b"\r")
            line_no += 1
            offset += len(line) + 1


class LineSplitter:
    """Cuts a stream of chunks into physical lines: feed it the chunks in order, then `end()`.
    Plain (sync) code, so a caller may run it in a thread, off the event loop."""

    def __init__(self, first_line_no: int = 1, first_offset: int = 0) -> None:
        self.line_no = first_line_no - 1
        self.offset = first_offset
        self._rest = b""

    def feed(self, chunk: bytes) -> Iterator[tuple[int, int, bytes]]:
        """(1-based line number, byte offset of the line, line without its newline) for every
        line the chunk completes; a line the chunk leaves open waits for the next one."""
        return self.feed_block(chunk).lines()

    def end(self) -> Iterator[tuple[int, int, bytes]]:
        """The last line, when the file does not end with a newline."""
        return self.end_block().lines()

    def feed_block(self, chunk: bytes) -> LineBlock:
        """The lines the chunk completes, as one block; a line it leaves open waits for the next."""
        data = self._rest + chunk
        cut = data.rfind(b"\n") + 1
        data, self._rest = data[:cut], data[cut:]
        return self._advance(data, data.count(b"\n"))

    def end_block(self) -> LineBlock:
        """The last line, when the file does not end with a newline (else an empty block)."""
        data, self._rest = self._rest, b""
        return self._advance(data, 1 if data else 0)

    def _advance(self, data: bytes, lines: int) -> LineBlock:
        block = LineBlock(self.line_no + 1, self.offset, data)
        self.line_no += lines
        self.offset += len(data)
        return block


async def split_lines_at(
    chunks: AsyncIterator[bytes], first_line_no: int = 1, first_offset: int = 0
) -> AsyncIterator[tuple[int, int, bytes]]:
    """Yield (1-based line number, byte offset of the line, line without its newline) for every
    physical line; numbering and offsets start where the chunks start in their file."""
    splitter = LineSplitter(first_line_no, first_offset)
    async for chunk in chunks:
        for line in splitter.feed(chunk):
            yield line
    for line in splitter.end():
        yield line


async def split_lines(chunks: AsyncIterator[bytes], first_line_no: int = 1) -> AsyncIterator[tuple[int, bytes]]:
    """Yield (1-based line number, line without its newline) for every physical line."""
    async for line_no, _, line in split_lines_at(chunks, first_line_no):
        yield line_no, line


async def read_chunks(fh: BinaryIO) -> AsyncIterator[bytes]:
    """Chunks of an open binary file, read in a thread so the event loop never blocks on disk."""
    while chunk := await asyncio.to_thread(fh.read, CHUNK_BYTES):
        yield chunk
