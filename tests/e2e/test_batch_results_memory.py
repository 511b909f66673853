"""Reading a million-line batch's results keeps the server's memory flat: the batch's checkpoint
chunks (what the worker writes) are seeded straight through the storage layer, not run, then
`GET /v1/batches/{batch_id}/results` streams all of them while the server's resident memory is
sampled; it grows by less than 100 MB."""

from __future__ import annotations

import asyncio
import time

import httpx
import pytest

from app.core.chunk_format import encode_line, pack_line_nos
from app.db.engine import Database
from app.db.repositories.chunks import ChunkRepository
from app.storage.local import LocalBlobStore
from harness.client import openai_client
from harness.db import database_url, execute
from harness.rss import TreeRss
from harness.server import ServerProcess
from tests.support.batches import TERMINAL, chat_line, create, wait_for

# Real `batchd serve` processes, without models: not in make test-fast (tests/conftest.py).
pytestmark = pytest.mark.engine

LINES = 1_000_000
CHUNK_LINES = 1000
PROJECT = "proj-mem"
MB = 1 << 20


def _line(n: int) -> bytes:
    ok = n % 10 != 0
    body = b'{"status_code":200,"request_id":"r","body":{}}' if ok else b"null"
    error = b"null" if ok else b'{"code":"request_timeout","message":"m"}'
    return b'{"id":"l-%d","custom_id":"c-%d","response":%s,"error":%s}' % (n, n, body, error)


async def _seed(server: ServerProcess, batch_id: str) -> None:
    """The chunks a million-line run leaves: a blob of lines and a row per CHUNK_LINES lines
    (blobs written a few dozen at a time, rows in one transaction: seeding is not measured)."""
    store = LocalBlobStore(server.data_dir / "blobs")

    async def write_blob(first: int) -> str:
        writer = store.new_writer(PROJECT)
        writer.write(b"".join(encode_line(n, n % 10 != 0, _line(n)) for n in range(first + 1, first + CHUNK_LINES + 1)))
        await writer.drain()
        await store.commit(writer, PROJECT, f"chunk-seed-{first}")
        return f"chunk-seed-{first}"

    firsts = range(0, LINES, CHUNK_LINES)
    for group in range(0, len(firsts), 50):
        await asyncio.gather(*(write_blob(first) for first in firsts[group : group + 50]))
    db = Database(database_url(server))
    try:
        async with db.write() as session:
            chunks = ChunkRepository(session)
            for first in firsts:
                numbers = range(first + 1, first + CHUNK_LINES + 1)
                await chunks.add(batch_id, first // 500, f"chunk-seed-{first}", pack_line_nos(numbers), CHUNK_LINES)
    finally:
        await db.dispose()


def test_reading_a_million_results_keeps_server_memory_flat(tmp_path):
    server = ServerProcess(tmp_path / "server", env={"BATCHD_API_KEYS": f"key-mem={PROJECT}"})
    server.data_dir.mkdir()
    server.start()
    try:
        client = openai_client(server.base_url, "key-mem")
        batch = wait_for(client, create(client, [chat_line("x")]).id, TERMINAL, timeout=30)  # no model: failed
        execute(server, "UPDATE batches SET status = 'completed' WHERE id = :id", id=batch.id)
        started = time.monotonic()
        asyncio.run(_seed(server, batch.id))
        seeded = time.monotonic()
        lines = failed = 0
        url = f"{server.base_url}/batches/{batch.id}/results"
        with TreeRss(server.pid, interval=0.05) as rss:
            with httpx.stream("GET", url, headers={"Authorization": "Bearer key-mem"}, timeout=120) as response:
                assert response.status_code == 200 and response.headers["x-batch-incomplete"] == "false"
                for line in response.iter_lines():
                    lines += 1
                    failed += '"response":null' in line
        assert (lines, failed) == (LINES, LINES // 10)
        print(
            f"server RSS grew {rss.growth / MB:.1f} MB while streaming {LINES} result lines "
            f"(seeded in {seeded - started:.1f} s, read in {time.monotonic() - seeded:.1f} s)"
        )
        assert rss.growth < 100 * MB, f"server RSS grew {rss.growth / MB:.0f} MB"
    finally:
        server.stop()
