"""Shards and checkpoint chunks on the real backends: a line recorded twice (a flush retried after
a crash, or a line re-run on resume) is counted once and read back once; a replica whose shard
was taken over or sealed writes nothing; the batch moves on once, when its last shard is done;
lines checkpointed before the upgrade to chunks (migration 0015) are all still there after it."""

from __future__ import annotations

import asyncio

import pytest
from sqlalchemy import insert, text

from app.core.chunk_format import encode
from app.db.engine import Database
from app.db.migrate import upgrade
from app.db.models import Batch
from app.db.repositories.batches import BatchRepository, LeaseLost, LineRow
from app.db.repositories.chunks import ChunkRepository
from app.db.repositories.shards import ShardRepository, ShardSpan
from app.storage.local import LocalBlobStore
from app.worker.checkpoint import Checkpoint
from app.worker.chunks import FinishedLine, finished_shards

LEASE = 10.0


def _row(line_no: int, ok: bool = True) -> LineRow:
    return LineRow(line_no, ok, f'{{"custom_id": "c{line_no}"}}', input_tokens=3, output_tokens=5)


async def _setup(db: Database) -> None:
    async with db.write() as session:
        # A Core insert names only these columns (and those with defaults), so it also fits the
        # older schema the carry-over test starts from (columns added since are left out).
        await session.execute(
            insert(Batch.__table__).values(
                id="batch_1",
                project="p",
                endpoint="/v1/chat/completions",
                input_file_id="file-1",
                completion_window="24h",
                status="in_progress",
                created_at=0,
                expires_at=2**40,
                total=6,
            )
        )
        await ShardRepository(session).add_all(
            "batch_1",
            [
                ShardSpan(first_line=1, end_line=5, start_offset=0, end_offset=400, lines=4),
                ShardSpan(first_line=5, end_line=7, start_offset=400, end_offset=None, lines=2),
            ],
        )


async def _finished(db: Database, store: LocalBlobStore) -> list[tuple[int, FinishedLine]]:
    """(shard_no, line) of every recorded line, as finalize reads them."""
    return [(shard_no, line) async for shard_no, lines in finished_shards(db, store, "batch_1", "p") for line in lines]


async def _record(db: Database, store: LocalBlobStore, claim, rows: list[LineRow], blob_id: str) -> int:
    """What a checkpoint write does: the blob first, then the chunk and the counters."""
    writer = store.new_writer("p", blob_id)
    writer.write(encode(rows))
    await store.commit(writer, "p", blob_id)
    async with db.write() as session:
        return await ShardRepository(session).record_lines(claim, rows, blob_id)


async def _claim(db: Database, owner: str, now: float, skip=()):
    async with db.write() as session:
        return await ShardRepository(session).claim(owner, now, LEASE, list(skip))


async def _assert_recorded(db: Database, claim, line_nos: set[int]) -> None:
    """The shard has recorded exactly `line_nos`, and counts each once."""
    async with db.read() as session:
        assert await ShardRepository(session).finished_line_numbers(claim) == line_nos
        assert await ShardRepository(session).count_lines(claim) == len(line_nos)


async def _scenario(url: str, store: LocalBlobStore) -> None:
    await upgrade(url)
    db = Database(url)
    try:
        await _setup(db)
        a = await _claim(db, "replica-a", 100.0)
        b = await _claim(db, "replica-b", 100.0)
        assert (a.shard_no, b.shard_no, a.taken_over, b.lines) == (0, 1, False, 2)
        assert await _claim(db, "replica-c", 100.0) is None  # both leased

        assert await _record(db, store, a, [_row(1), _row(2), _row(3, ok=False)], "chunk-1") == 3
        # 2 and 3 again (their blob holds them too, but the chunk counts only 4), 4 new
        assert await _record(db, store, a, [_row(2), _row(3, ok=False), _row(4)], "chunk-2") == 1
        async with db.read() as session:
            assert await ShardRepository(session).finished_line_numbers(a) == {1, 2, 3, 4}
            assert await ShardRepository(session).count_lines(b) == 0
            batch = await BatchRepository(session).load("batch_1")
        assert (batch.completed, batch.failed, batch.input_tokens, batch.output_tokens) == (3, 1, 12, 20)

        # Replica b stops renewing; c takes its shard over after the lease expires, b writes nothing.
        async with db.write() as session:
            await ShardRepository(session).heartbeat(a, 105.0, LEASE)
        c = await _claim(db, "replica-c", 100.0 + LEASE + 1)
        assert (c.shard_no, c.taken_over, c.fence) == (1, True, b.fence + 1)
        with pytest.raises(LeaseLost):
            await _record(db, store, b, [_row(5)], "chunk-stale")
        assert await _record(db, store, c, [_row(5), _row(6)], "chunk-3") == 2

        async with db.write() as session:
            await ShardRepository(session).mark_done(a, 120.0)
        async with db.write() as session:  # shard 1 is not done yet
            assert not await BatchRepository(session).finish_running("batch_1", 120)
        async with db.write() as session:
            await ShardRepository(session).mark_done(c, 121.0)
        async with db.write() as session:
            assert await BatchRepository(session).finish_running("batch_1", 121)
        async with db.write() as session:  # only once
            assert not await BatchRepository(session).finish_running("batch_1", 121)
        async with db.read() as session:
            shards = await ShardRepository(session).of_batch("batch_1")
            assert [(s.status, s.replica, s.lines_done) for s in shards] == [
                ("done", "replica-a", 4),
                ("done", "replica-c", 2),
            ]
            assert (await BatchRepository(session).load("batch_1")).status == "finalizing"

        read = await _finished(db, store)
        assert [(shard, r.line_no, r.ok) for shard, r in read] == [
            (0, 1, True),
            (0, 2, True),
            (0, 3, False),
            (0, 4, True),
            (1, 5, True),
            (1, 6, True),
        ]
        assert read[0][1].line == b'{"custom_id": "c1"}'
        async with db.write() as session:
            assert sorted(await ChunkRepository(session).delete_of_batch("batch_1")) == [
                "chunk-1",
                "chunk-2",
                "chunk-3",
            ]
        assert await _finished(db, store) == []
    finally:
        await db.dispose()


async def _sealing(url: str) -> None:
    await upgrade(url)
    db = Database(url)
    try:
        await _setup(db)
        a = await _claim(db, "replica-a", 100.0)
        async with db.write() as session:
            await ShardRepository(session).seal("batch_1")
        with pytest.raises(LeaseLost):  # a sealed shard takes no more lines
            async with db.write() as session:
                await ShardRepository(session).record_lines(a, [_row(1)], "chunk-1")
        async with db.write() as session:
            await BatchRepository(session).request_cancel("p", "batch_1", 101)
        assert await _claim(db, "replica-b", 101.0) is None  # no shard of a cancelled batch
    finally:
        await db.dispose()


def test_shard_claims_checkpoints_takeover_and_finish(database_factory, tmp_path):
    url = database_factory() or f"sqlite+aiosqlite:///{tmp_path / 'batchd.db'}"
    asyncio.run(_scenario(url, LocalBlobStore(tmp_path / "blobs")))


def test_a_sealed_shard_takes_no_more_lines(database_factory, tmp_path):
    url = database_factory() or f"sqlite+aiosqlite:///{tmp_path / 'batchd.db'}"
    asyncio.run(_sealing(url))


async def _carry_over(url: str, store: LocalBlobStore) -> None:
    await upgrade(url, "0014")
    db = Database(url)
    try:
        await _setup(db)
        async with db.write() as session:
            for line_no, ok in ((1, True), (3, False), (6, True)):
                await session.execute(
                    text("INSERT INTO batch_lines (batch_id, line_no, ok, line) VALUES ('batch_1', :n, :ok, :line)"),
                    {"n": line_no, "ok": ok, "line": f'{{"custom_id": "c{line_no}", "x": "a b"}}'},
                )
        await upgrade(url)
        read = await _finished(db, store)
        assert [(shard, r.line_no, r.ok, r.line) for shard, r in read] == [
            (0, 1, True, b'{"custom_id": "c1", "x": "a b"}'),
            (0, 3, False, b'{"custom_id": "c3", "x": "a b"}'),
            (1, 6, True, b'{"custom_id": "c6", "x": "a b"}'),
        ]
        a = await _claim(db, "replica-a", 100.0)
        await _assert_recorded(db, a, {1, 3})  # a resumed shard skips them; each shard has its own chunk
    finally:
        await db.dispose()


def test_lines_checkpointed_before_chunks_survive_the_upgrade(database_factory, tmp_path):
    url = database_factory() or f"sqlite+aiosqlite:///{tmp_path / 'batchd.db'}"
    asyncio.run(_carry_over(url, LocalBlobStore(tmp_path / "blobs")))


async def _known_lines(url: str, store: LocalBlobStore) -> None:
    """A checkpoint that knows its shard's recorded lines (read after its claim) writes without
    reading them back, leaves those out as a read would, and reads them again after a write whose
    outcome it does not know."""
    await upgrade(url)
    db = Database(url)
    try:
        await _setup(db)
        a = await _claim(db, "replica-a", 100.0)
        assert await _record(db, store, a, [_row(1)], "chunk-1") == 1
        checkpoint = Checkpoint(db, store, "p", a, recorded={1})
        for row in (_row(1), _row(2)):  # 1 ran again (a retried write): it is left out
            checkpoint._buffer.append(row)
        await checkpoint.flush()
        assert checkpoint._recorded == {1, 2}

        async def failing(*args, **kwargs):
            raise OSError("disk full")

        checkpoint._buffer.append(_row(3))
        real_commit, store.commit = store.commit, failing  # type: ignore[method-assign]
        with pytest.raises(OSError):
            await checkpoint.flush()
        store.commit = real_commit  # type: ignore[method-assign]
        assert checkpoint._recorded is None and [r.line_no for r in checkpoint._buffer] == [3]
        checkpoint._buffer.append(_row(2))
        await checkpoint.flush()  # reads what is recorded: 2 is left out again
        await _assert_recorded(db, a, {1, 2, 3})
    finally:
        await db.dispose()


def test_a_checkpoint_that_knows_its_recorded_lines_need_not_read_them(database_factory, tmp_path):
    url = database_factory() or f"sqlite+aiosqlite:///{tmp_path / 'batchd.db'}"
    asyncio.run(_known_lines(url, LocalBlobStore(tmp_path / "blobs")))
