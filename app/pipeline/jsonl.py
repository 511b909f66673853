"""Read JSONL line by line without loading it: chunks from any async byte source, split here."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from typing import BinaryIO

CHUNK_BYTES = 1024 * 1024


async def split_lines_at(
    chunks: AsyncIterator[bytes], first_line_no: int = 1, first_offset: int = 0
) -> AsyncIterator[tuple[int, int, bytes]]:
    """Yield (1-based line number, byte offset of the line, line without its newline) for every
    physical line; numbering and offsets start where the chunks start in their file."""
    line_no = first_line_no - 1
    offset = first_offset
    rest = b""
    async for chunk in chunks:
        lines = (rest + chunk).split(b"\n")
        rest = lines.pop()
        for line in lines:
            line_no += 1
            yield line_no, offset, line.rstrip(b"\r")
            offset += len(line) + 1
    if rest:
        yield line_no + 1, offset, rest.rstrip(b"\r")


async def split_lines(chunks: AsyncIterator[bytes], first_line_no: int = 1) -> AsyncIterator[tuple[int, bytes]]:
    """Yield (1-based line number, line without its newline) for every physical line."""
    async for line_no, _, line in split_lines_at(chunks, first_line_no):
        yield line_no, line


async def read_chunks(fh: BinaryIO) -> AsyncIterator[bytes]:
    """Chunks of an open binary file, read in a thread so the event loop never blocks on disk."""
    while chunk := await asyncio.to_thread(fh.read, CHUNK_BYTES):
        yield chunk
