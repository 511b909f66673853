"""The worker's batch claim on the real databases: the oldest batch with a one-replica step goes
first, under a lease with a fencing token; a lease renewed holds, a lease let expire is taken over
(and marked so), and the replica that lost it can write nothing to the batch any more."""

from __future__ import annotations

import pytest

from app.core.statuses import BatchStatus, ForbiddenBatchMove, ShardStatus
from app.db.engine import Database
from app.db.repositories.batches import BatchRepository, LeaseLost
from app.db.repositories.shards import ShardRepository, ShardSpan
from tests.support.database import run_on_database
from tests.worker.support import LEASE, add_batch, add_shards, claim_batch, claim_shard, load

T0 = 1000.0


def test_oldest_batch_first_under_a_lease_and_a_fence(db_url):
    async def scenario(db: Database) -> None:
        for batch_id in ("batch_old", "batch_mid", "batch_new"):
            await add_batch(db, batch_id, BatchStatus.VALIDATING)
        first = await claim_batch(db, "replica-a", T0)
        assert first is not None and (first.batch_id, first.taken_over) == ("batch_old", False)
        row = await load(db, "batch_old")
        assert (row.lease_owner, row.lease_expires_at, row.fence) == ("replica-a", T0 + LEASE, first.fence)
        # Held: the next claim takes the next oldest; a skipped batch is passed over.
        second = await claim_batch(db, "replica-b", T0, skip=("batch_mid",))
        assert second is not None and second.batch_id == "batch_new"
        third = await claim_batch(db, "replica-b", T0)
        assert third is not None and third.batch_id == "batch_mid"
        assert await claim_batch(db, "replica-c", T0) is None

    run_on_database(db_url, scenario)


def test_a_transition_moves_only_as_the_table_allows(db_url):
    """BatchRepository.transition enforces BATCH_MOVES: by default from every status allowed to
    reach the target; a move the table refuses raises and writes nothing."""

    async def scenario(db: Database) -> None:
        await add_batch(db, "batch_1", BatchStatus.FINALIZING)
        claim = await claim_batch(db, "replica-a", T0)
        assert claim is not None
        async with db.write() as session:
            repo = BatchRepository(session)
            with pytest.raises(ForbiddenBatchMove):
                await repo.transition(claim, (BatchStatus.FINALIZING,), status=BatchStatus.IN_PROGRESS)
            assert not await repo.transition(claim, status=BatchStatus.CANCELLED)  # from cancelling only
        assert (await load(db, "batch_1")).status == BatchStatus.FINALIZING
        async with db.write() as session:
            assert await BatchRepository(session).transition(claim, status=BatchStatus.COMPLETED, completed_at=7)
        row = await load(db, "batch_1")
        assert (row.status, row.completed_at) == (BatchStatus.COMPLETED, 7)

    run_on_database(db_url, scenario)


def test_the_replica_that_ended_a_batchs_last_shard_claims_that_batch_alone(db_url):
    """The finalize claim of the replica that ran the last shard (Worker._finalize_now) takes
    that batch, not the oldest with a step, and nothing once another replica holds it."""

    async def scenario(db: Database) -> None:
        await add_batch(db, "batch_old", BatchStatus.VALIDATING)
        await add_batch(db, "batch_done", BatchStatus.FINALIZING)
        await add_batch(db, "batch_idle", BatchStatus.IN_PROGRESS)
        await add_shards(db, "batch_idle", [ShardSpan(1, 2, 0, 10, 1)])
        mine = await claim_batch(db, "replica-a", T0, only="batch_done")
        assert mine is not None and mine.batch_id == "batch_done"
        assert await claim_batch(db, "replica-b", T0, only="batch_done") is None
        # A batch whose shards still run has no one-replica step to take.
        assert await claim_batch(db, "replica-a", T0, only="batch_idle") is None
        oldest = await claim_batch(db, "replica-b", T0)
        assert oldest is not None and oldest.batch_id == "batch_old"

    run_on_database(db_url, scenario)


def test_an_expired_lease_is_taken_over_and_the_old_holder_writes_nothing(db_url):
    async def scenario(db: Database) -> None:
        await add_batch(db, "batch_1", BatchStatus.FINALIZING)
        a = await claim_batch(db, "replica-a", T0)
        assert a is not None
        # Renewed before it runs out: nobody else gets it, even past the first expiry.
        async with db.write() as session:
            await BatchRepository(session).heartbeat(a, T0 + LEASE - 1, LEASE)
        assert await claim_batch(db, "replica-b", T0 + LEASE + 1) is None
        # Let expire: b takes it over, with the next fence.
        b = await claim_batch(db, "replica-b", T0 + 2 * LEASE)
        assert b is not None and (b.batch_id, b.fence, b.taken_over) == ("batch_1", a.fence + 1, True)
        async with db.write() as session:
            repo = BatchRepository(session)
            with pytest.raises(LeaseLost):
                await repo.heartbeat(a, T0 + 2 * LEASE, LEASE)
            assert not await repo.transition(a, (BatchStatus.FINALIZING,), status=BatchStatus.COMPLETED)
            await repo.release(a)  # a stale release frees nothing
        row = await load(db, "batch_1")
        assert (row.status, row.lease_owner, row.fence) == (BatchStatus.FINALIZING, "replica-b", b.fence)
        # The new holder's writes go through.
        async with db.write() as session:
            assert await BatchRepository(session).transition(b, (BatchStatus.FINALIZING,), status=BatchStatus.COMPLETED)
        assert (await load(db, "batch_1")).status == BatchStatus.COMPLETED
        assert await claim_batch(db, "replica-a", T0 + 10 * LEASE) is None  # terminal: nothing to do

    run_on_database(db_url, scenario)


def test_a_released_or_own_lease_is_no_takeover(db_url):
    async def scenario(db: Database) -> None:
        await add_batch(db, "batch_1", BatchStatus.CANCELLING)
        a = await claim_batch(db, "replica-a", T0)
        assert a is not None
        async with db.write() as session:
            await BatchRepository(session).release(a)
        row = await load(db, "batch_1")
        assert (row.lease_owner, row.lease_expires_at) == (None, None)
        b = await claim_batch(db, "replica-b", T0 + 1)  # at once, not after the lease
        assert b is not None and (b.fence, b.taken_over) == (a.fence + 1, False)
        again = await claim_batch(db, "replica-b", T0 + 1 + 2 * LEASE)  # its own lease ran out
        assert again is not None and (again.fence, again.taken_over) == (b.fence + 1, False)

    run_on_database(db_url, scenario)


def test_which_batches_have_a_one_replica_step(db_url):
    """in_progress is claimed only once its shards are done, or past its expiry when no shard is
    leased; cancelling once no shard is leased; terminal batches never."""

    async def scenario(db: Database) -> None:
        span = ShardSpan(first_line=1, end_line=2, start_offset=0, end_offset=None, lines=1)
        await add_batch(db, "batch_running", BatchStatus.IN_PROGRESS, in_progress_at=1)
        await add_batch(db, "batch_expiring", BatchStatus.IN_PROGRESS, in_progress_at=1, expires_at=int(T0 + 5))
        await add_batch(db, "batch_cancelled", BatchStatus.IN_PROGRESS, in_progress_at=1)
        await add_batch(db, "batch_done", BatchStatus.COMPLETED)
        shards = {}
        for batch_id in ("batch_running", "batch_expiring", "batch_cancelled"):
            await add_shards(db, batch_id, [span])
            shards[batch_id] = await claim_shard(db, "replica-s", T0, batch_id=batch_id)
            assert shards[batch_id] is not None
        async with db.write() as session:  # cancelled while its shard is leased
            assert await BatchRepository(session).request_cancel("p", "batch_cancelled", int(T0))
        # Every shard leased: nothing to claim yet, even past the expiry.
        assert await claim_batch(db, "replica-a", T0 + 6) is None
        async with db.write() as session:
            await ShardRepository(session).mark_done(shards["batch_running"], T0 + 6)
        # Every shard done: the batch moves on (here, since the shard's replica did not).
        got = await claim_batch(db, "replica-a", T0 + 6)
        assert got is not None and got.batch_id == "batch_running"
        assert await claim_batch(db, "replica-a", T0 + 6) is None
        # Once the shards' leases ran out: the expired batch, then the cancelled one; never a
        # completed one.
        claimed = [await claim_batch(db, "replica-a", T0 + LEASE + 1) for _ in range(3)]
        assert [c.batch_id if c else None for c in claimed] == ["batch_expiring", "batch_cancelled", None]
        async with db.read() as session:
            statuses = [s.status for s in await ShardRepository(session).of_batch("batch_cancelled")]
        assert statuses == [ShardStatus.RUNNING]  # the batch claim leaves the shard as it was

    run_on_database(db_url, scenario)
