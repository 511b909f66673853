"""Checkpoint rows on the real backends: a line recorded twice (a flush retried after a crash,
or a line re-run on resume) is stored once and counted once."""

from __future__ import annotations

import asyncio

import pytest

from app.db.engine import Database
from app.db.migrate import upgrade
from app.db.models import Batch
from app.db.repositories.batches import BatchRepository, Claim, LeaseLost, LineRow


def _row(line_no: int, ok: bool = True) -> LineRow:
    return LineRow(line_no, ok, f'{{"custom_id": "c{line_no}"}}', input_tokens=3, output_tokens=5)


async def _scenario(url: str) -> None:
    await upgrade(url)
    db = Database(url)
    try:
        async with db.write() as session:
            session.add(Batch(id="batch_1", project="p", endpoint="/v1/chat/completions", input_file_id="file-1",
                              completion_window="24h", status="in_progress", created_at=0, expires_at=2**40,
                              fence=1, lease_owner="w"))
        claim = Claim("batch_1", 1)

        async with db.write() as session:
            assert await BatchRepository(session).record_lines(claim, [_row(1), _row(2), _row(3, ok=False)]) == 3
        async with db.write() as session:  # 2 and 3 again, 4 new
            assert await BatchRepository(session).record_lines(claim, [_row(2), _row(3, ok=False), _row(4)]) == 1

        async with db.read() as session:
            repo = BatchRepository(session)
            assert await repo.finished_line_numbers("batch_1") == {1, 2, 3, 4}
            rows = [(r.line_no, r.ok, r.line) async for r in repo.stream_lines("batch_1")]
            batch = await repo.load("batch_1")
        assert rows == [(n, n != 3, f'{{"custom_id": "c{n}"}}') for n in (1, 2, 3, 4)]
        assert (batch.completed, batch.failed, batch.input_tokens, batch.output_tokens) == (3, 1, 12, 20)

        with pytest.raises(LeaseLost):  # a worker whose lease was taken over writes nothing
            async with db.write() as session:
                await BatchRepository(session).record_lines(Claim("batch_1", 0), [_row(5)])
        async with db.read() as session:
            assert await BatchRepository(session).finished_line_numbers("batch_1") == {1, 2, 3, 4}
    finally:
        await db.dispose()


def test_recording_a_line_twice_stores_and_counts_it_once(database_factory, tmp_path):
    url = database_factory() or f"sqlite+aiosqlite:///{tmp_path / 'batchd.db'}"
    asyncio.run(_scenario(url))
