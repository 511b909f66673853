"""Where `run-batch` writes: a local path, `-` (stdout) or an http(s) URL (e.g. a presigned S3
PUT). Lines are written as they finish. A local or URL output first goes to a `.partial` file
(kept across interruptions for --resume) and is published only when the run completes: renamed
into place, or PUT with retries."""

from __future__ import annotations

import asyncio
import hashlib
import os
import sys
import tempfile
from pathlib import Path

import httpx

from app.runbatch.retrying import http_retry
from app.runbatch.sources import is_url

FLUSH_EVERY = 256
_reserved_stdout = None


def reserve_stdout():
    """Keep the real stdout for output lines only: anything else that writes to file
    descriptor 1 (vLLM's logs, its engine processes) is sent to stderr from now on."""
    global _reserved_stdout
    if _reserved_stdout is None:
        sys.stdout.flush()
        _reserved_stdout = os.fdopen(os.dup(1), "wb")
        os.dup2(2, 1)
    return _reserved_stdout


def partial_path(location: str, tmp_dir: str | None) -> Path:
    """The work file behind an output; stable for the same location, so a rerun finds it."""
    if is_url(location):
        # The query of a presigned URL changes with every signature; the path identifies it.
        key = hashlib.sha256(location.split("?", 1)[0].encode()).hexdigest()[:24]
        return Path(tmp_dir or tempfile.gettempdir()) / f"batchd-run-batch-{key}.jsonl.partial"
    return Path(location).with_name(Path(location).name + ".partial")


class LineSink:
    def __init__(self, location: str, tmp_dir: str | None, *, append: bool) -> None:
        self.location = location
        self.lines = 0
        self._unflushed = 0
        if location == "-":
            self.path = None
            self._fh = reserve_stdout()
        else:
            self.path = partial_path(location, tmp_dir)
            self.path.parent.mkdir(parents=True, exist_ok=True)
            self._fh = open(self.path, "ab" if append else "wb")  # noqa: SIM115 - closed in finish()

    def write(self, line: bytes) -> None:
        self._fh.write(line + b"\n")
        self.lines += 1
        self._unflushed += 1
        if self._unflushed >= FLUSH_EVERY:
            self.flush()

    def flush(self) -> None:
        # Whole lines only reach the file, so an interrupted run leaves at most a torn last line.
        self._fh.flush()
        self._unflushed = 0

    async def finish(self) -> None:
        """Publish the output: fsync and rename, or upload; stdout is just flushed."""
        self.flush()
        if self.path is None:
            return
        os.fsync(self._fh.fileno())
        self._fh.close()
        if is_url(self.location):
            await _put(self.location, self.path)
            self.path.unlink()
        else:
            os.replace(self.path, self.location)

    def close(self) -> None:
        """Stop without publishing (the partial file stays for --resume)."""
        if self.path is not None and not self._fh.closed:
            self.flush()
            self._fh.close()


async def _put(url: str, path: Path) -> None:
    size = path.stat().st_size

    async def attempt() -> None:
        async with httpx.AsyncClient(timeout=httpx.Timeout(300, connect=10)) as client:
            with path.open("rb") as fh:
                response = await client.put(url, content=_file_chunks(fh), headers={"Content-Length": str(size)})
            response.raise_for_status()

    await http_retry(attempt)


async def _file_chunks(fh):
    while chunk := await asyncio.to_thread(fh.read, 1024 * 1024):
        yield chunk
