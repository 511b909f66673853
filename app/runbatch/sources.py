"""Where `run-batch` reads its input: a local path, `-` (stdin) or an http(s) URL (e.g. a
presigned S3 GET). Every source is streamed in chunks; nothing holds the whole file."""

from __future__ import annotations

import asyncio
import sys
from collections.abc import AsyncIterator
from pathlib import Path

import httpx

from app.pipeline.jsonl import read_chunks
from app.runbatch.retrying import http_retry


def is_url(location: str) -> bool:
    return location.startswith(("http://", "https://"))


async def input_chunks(location: str) -> AsyncIterator[bytes]:
    if location == "-":
        async for chunk in read_chunks(sys.stdin.buffer):
            yield chunk
    elif is_url(location):
        async for chunk in _http_chunks(location):
            yield chunk
    else:
        fh = await asyncio.to_thread(open, location, "rb")
        try:
            async for chunk in read_chunks(fh):
                yield chunk
        finally:
            fh.close()


async def open_input(location: str) -> None:
    """Open `location` and close it again: raises what reading it would (OSError, httpx.HTTPError)."""
    if location == "-":
        return
    if is_url(location):
        async with _client() as client:
            response = await http_retry(lambda: _open_stream(client, location))
            await response.aclose()
    else:
        fh = await asyncio.to_thread(open, location, "rb")
        fh.close()


def _client() -> httpx.AsyncClient:
    return httpx.AsyncClient(timeout=httpx.Timeout(60, connect=10), follow_redirects=True)


async def _http_chunks(url: str) -> AsyncIterator[bytes]:
    async with _client() as client:
        # Only opening the stream is retried: once bytes flowed, a retry would repeat lines.
        response = await http_retry(lambda: _open_stream(client, url))
        try:
            async for chunk in response.aiter_bytes():
                yield chunk
        finally:
            await response.aclose()


async def _open_stream(client: httpx.AsyncClient, url: str) -> httpx.Response:
    response = await client.send(client.build_request("GET", url), stream=True)
    if response.status_code >= 400:
        await response.aread()
        response.raise_for_status()
    return response


def count_lines(location: str) -> int | None:
    """Number of non-blank lines of a local file (for progress); None for streams."""
    if location == "-" or is_url(location):
        return None
    count = 0
    with Path(location).open("rb") as fh:
        for line in fh:
            if line.strip():
                count += 1
    return count
