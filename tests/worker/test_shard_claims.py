"""Shard claims on the real databases: shards go out in batch then shard order, only of running
batches before their expiry; a heartbeat holds the lease; a release hands the shard back at once;
a stale claim (its lease taken over, or its batch sealed) writes nothing: no heartbeat, no lines,
no release, no done."""

from __future__ import annotations

import pytest

from app.core.statuses import BatchStatus, ShardStatus
from app.db.engine import Database
from app.db.repositories.batches import BatchRepository, LeaseLost, LineRow
from app.db.repositories.shards import ShardRepository, ShardSpan
from app.storage.local import LocalBlobStore
from tests.support.database import run_on_database
from tests.worker.support import LEASE, add_batch, add_shards, claim_shard, load, record

T0 = 1000.0
SPANS = [
    ShardSpan(first_line=1, end_line=3, start_offset=0, end_offset=200, lines=2),
    ShardSpan(first_line=3, end_line=5, start_offset=200, end_offset=None, lines=2),
]


def _row(line_no: int) -> LineRow:
    return LineRow(line_no, True, f'{{"custom_id": "c{line_no}"}}')


async def _shards(db: Database, batch_id: str) -> list[tuple[str, str | None, int]]:
    async with db.read() as session:
        return [(s.status, s.lease_owner, s.fence) for s in await ShardRepository(session).of_batch(batch_id)]


def test_shards_go_out_in_order_and_only_of_running_batches(db_url):
    async def scenario(db: Database) -> None:
        await add_batch(db, "batch_validating", BatchStatus.VALIDATING)
        await add_batch(db, "batch_old", BatchStatus.IN_PROGRESS, in_progress_at=1)
        await add_batch(db, "batch_expired", BatchStatus.IN_PROGRESS, in_progress_at=1, expires_at=int(T0))
        await add_batch(db, "batch_new", BatchStatus.IN_PROGRESS, in_progress_at=1)
        for batch_id in ("batch_validating", "batch_old", "batch_expired", "batch_new"):
            await add_shards(db, batch_id, SPANS)
        got = [await claim_shard(db, "replica-a", T0) for _ in range(5)]
        assert [(c.batch_id, c.shard_no, c.taken_over) if c else None for c in got] == [
            ("batch_old", 0, False),
            ("batch_old", 1, False),
            ("batch_new", 0, False),
            ("batch_new", 1, False),
            None,
        ]
        first = got[0]
        assert first is not None and (first.first_line, first.end_line, first.lines) == (1, 3, 2)
        assert await _shards(db, "batch_old") == [
            (ShardStatus.RUNNING, "replica-a", 1),
            (ShardStatus.RUNNING, "replica-a", 1),
        ]
        assert [s for s, _, _ in await _shards(db, "batch_validating")] == [ShardStatus.PENDING] * 2

    run_on_database(db_url, scenario)


def test_heartbeat_release_and_done(db_url):
    async def scenario(db: Database) -> None:
        await add_batch(db, "batch_1", BatchStatus.IN_PROGRESS, in_progress_at=1)
        await add_shards(db, "batch_1", SPANS)
        a0 = await claim_shard(db, "replica-a", T0, batch_id="batch_1")
        a1 = await claim_shard(db, "replica-a", T0, batch_id="batch_1")
        assert a0 is not None and a1 is not None
        async with db.write() as session:
            await ShardRepository(session).heartbeat(a0, T0 + LEASE - 1, LEASE)
        # Past the first lease: the renewed shard is still held, the other one is free again.
        late = await claim_shard(db, "replica-b", T0 + LEASE + 1)
        assert late is not None and (late.shard_no, late.taken_over, late.fence) == (1, True, a1.fence + 1)
        async with db.write() as session:  # b gives it back (a drain): claimable at once
            await ShardRepository(session).release(late)
        assert (await _shards(db, "batch_1"))[1] == (ShardStatus.PENDING, None, late.fence)
        again = await claim_shard(db, "replica-c", T0 + LEASE + 1, resumed_only=True)
        assert again is not None and (again.shard_no, again.taken_over) == (1, False)
        async with db.write() as session:
            await ShardRepository(session).mark_done(a0, T0 + LEASE + 2)
            await ShardRepository(session).mark_done(again, T0 + LEASE + 2)
        assert await _shards(db, "batch_1") == [
            (ShardStatus.DONE, None, a0.fence),
            (ShardStatus.DONE, None, again.fence),
        ]
        assert await claim_shard(db, "replica-d", T0 + 10 * LEASE) is None  # done shards stay done
        async with db.write() as session:
            assert await BatchRepository(session).finish_running("batch_1", int(T0 + LEASE + 3))
        assert (await load(db, "batch_1")).status == BatchStatus.FINALIZING

    run_on_database(db_url, scenario)


def test_a_stale_shard_claim_writes_nothing(db_url, tmp_path):
    async def scenario(db: Database) -> None:
        store = LocalBlobStore(tmp_path / "blobs")
        await add_batch(db, "batch_1", BatchStatus.IN_PROGRESS, in_progress_at=1, total=4)
        await add_shards(db, "batch_1", SPANS)
        stale = await claim_shard(db, "replica-a", T0, batch_id="batch_1")
        assert stale is not None
        assert await record(db, store, stale, [_row(1)], "chunk-a1") == 1
        fresh = await claim_shard(db, "replica-b", T0 + LEASE + 1, batch_id="batch_1")
        assert fresh is not None and (fresh.shard_no, fresh.taken_over) == (0, True)

        with pytest.raises(LeaseLost):
            await record(db, store, stale, [_row(2)], "chunk-a2")
        for write in ("heartbeat", "mark_done"):
            with pytest.raises(LeaseLost):
                async with db.write() as session:
                    repo = ShardRepository(session)
                    await (repo.heartbeat(stale, T0, LEASE) if write == "heartbeat" else repo.mark_done(stale, T0))
        async with db.write() as session:
            await ShardRepository(session).release(stale)
        assert (await _shards(db, "batch_1"))[0] == (ShardStatus.RUNNING, "replica-b", fresh.fence)
        batch = await load(db, "batch_1")
        assert (batch.completed, batch.failed) == (1, 0)  # only what the stale runner wrote in time
        async with db.read() as session:
            assert await ShardRepository(session).finished_line_numbers(fresh) == {1}

        # A sealed shard (its batch is being cancelled or expired) refuses its holder too.
        async with db.write() as session:
            await ShardRepository(session).seal("batch_1")
        with pytest.raises(LeaseLost):
            await record(db, store, fresh, [_row(2)], "chunk-b1")
        assert await _shards(db, "batch_1") == [
            (ShardStatus.PENDING, None, fresh.fence + 1),
            (ShardStatus.PENDING, None, 1),
        ]

    run_on_database(db_url, scenario)
