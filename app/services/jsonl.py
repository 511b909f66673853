"""Read JSONL line by line without loading it: chunks from any async byte source, split here."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from pathlib import Path
from typing import BinaryIO

CHUNK_BYTES = 1024 * 1024


async def split_lines(chunks: AsyncIterator[bytes]) -> AsyncIterator[tuple[int, bytes]]:
    """Yield (1-based line number, line without its newline) for every physical line."""
    line_no = 0
    rest = b""
    async for chunk in chunks:
        lines = (rest + chunk).split(b"\n")
        rest = lines.pop()
        for line in lines:
            line_no += 1
            yield line_no, line.rstrip(b"\r")
    if rest:
        yield line_no + 1, rest.rstrip(b"\r")


async def read_chunks(fh: BinaryIO) -> AsyncIterator[bytes]:
    """Chunks of an open binary file, read in a thread so the event loop never blocks on disk."""
    while chunk := await asyncio.to_thread(fh.read, CHUNK_BYTES):
        yield chunk


async def read_lines(path: Path) -> AsyncIterator[tuple[int, bytes]]:
    fh = await asyncio.to_thread(open, path, "rb")
    try:
        async for item in split_lines(read_chunks(fh)):
            yield item
    finally:
        fh.close()
