"""Read JSONL line by line without loading it: chunks from any async byte source, split here."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator, Iterator
from typing import BinaryIO

CHUNK_BYTES = 1024 * 1024


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
        lines = (self._rest + chunk).split(b"\n")
        self._rest = lines.pop()
        for line in lines:
            self.line_no += 1
            yield self.line_no, self.offset, line.rstrip(b"\r")
            self.offset += len(line) + 1

    def end(self) -> Iterator[tuple[int, int, bytes]]:
        """The last line, when the file does not end with a newline."""
        if self._rest:
            yield self.line_no + 1, self.offset, self._rest.rstrip(b"\r")


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
