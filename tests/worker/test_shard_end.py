"""A shard run's start and end cost no transactions of their own: what it starts from is read in
its claim's transaction (a first claim has no recorded lines to read), and the checkpoint write
that leaves every line recorded also marks the shard done. A checkpoint that lost count of its
recorded lines (a write of unknown outcome) leaves the end to its caller. A shard ending here
wakes the worker for shards only; batch steps wait for a wake or the poll. A checkpoint writes
when its rows reach FLUSH_ROWS or their results FLUSH_BYTES, whichever comes first."""

from __future__ import annotations

from types import SimpleNamespace
from typing import Any, cast

import pytest
from sqlalchemy import select

from app.core.batch_kinds import BatchApi
from app.core.statuses import BatchStatus, ShardStatus
from app.db.engine import Database
from app.db.models import UsageMinute
from app.db.repositories.batches import BatchRepository, LineRow
from app.db.repositories.shards import ShardClaim, ShardRepository, ShardSpan
from app.db.repositories.usage import UsageKey
from app.engine.results import Usage
from app.pipeline.executor import LineOutcome
from app.storage.local import LocalBlobStore
from app.worker import checkpoint as checkpoint_module
from app.worker.checkpoint import Checkpoint
from app.worker.runner import IDLE_POLL_SECONDS, Worker
from app.worker.shard_run import ShardRun, shard_start
from tests.support.database import run_on_database
from tests.worker.support import PROJECT, add_batch, add_shards, claim_shard

T0 = 100.0


def _row(line_no: int) -> LineRow:
    return LineRow(line_no, True, f'{{"custom_id": "c{line_no}"}}', input_tokens=2, output_tokens=3)


async def _one_shard_claimed(db: Database, lines: int) -> ShardClaim:
    """Batch b1 of `lines` lines in one shard, claimed by replica-a."""
    await add_batch(db, "b1", BatchStatus.IN_PROGRESS, total=lines)
    span = ShardSpan(first_line=1, end_line=lines + 1, start_offset=0, end_offset=None, lines=lines)
    await add_shards(db, "b1", [span])
    claim = await claim_shard(db, "replica-a", T0)
    assert claim is not None
    return claim


async def _shard(db: Database):
    async with db.read() as session:
        (shard,) = await ShardRepository(session).of_batch("b1")
    return shard


def test_the_last_write_marks_the_shard_done(db_url, tmp_path):
    store = LocalBlobStore(tmp_path / "blobs")

    async def scenario(db: Database) -> None:
        claim = await _one_shard_claimed(db, 3)
        assert claim.fence == 1
        async with db.write() as session:
            batch, done = await shard_start(session, claim)
        assert batch is not None and batch.id == "b1" and done == set()

        checkpoint = Checkpoint(db, store, PROJECT, claim, recorded=set(done))
        checkpoint._buffer += [_row(1), _row(2)]
        assert not await checkpoint.flush(finish=True)  # line 3 has not run: still running
        assert (await _shard(db)).status == ShardStatus.RUNNING
        checkpoint._buffer.append(_row(3))
        assert await checkpoint.flush(finish=True)
        shard = await _shard(db)
        assert (shard.status, shard.lines_done, shard.lease_owner) == (ShardStatus.DONE, 3, None)
        assert checkpoint.finished_batch is True  # its last shard: the same write moved the batch on
        async with db.read() as session:
            batch = await BatchRepository(session).load("b1")
        assert batch is not None and batch.status == BatchStatus.FINALIZING

    run_on_database(db_url, scenario)


def test_the_last_shard_to_end_moves_the_batch_on(db_url, tmp_path):
    store = LocalBlobStore(tmp_path / "blobs")

    async def scenario(db: Database) -> None:
        await add_batch(db, "b1", BatchStatus.IN_PROGRESS, total=2)
        spans = [ShardSpan(1, 2, 0, 10, 1), ShardSpan(2, 3, 10, None, 1)]
        await add_shards(db, "b1", spans)
        first, second = await claim_shard(db, "replica-a", T0), await claim_shard(db, "replica-b", T0)
        assert first is not None and second is not None
        ends = []
        for claim, line_no in ((first, 1), (second, 2)):
            checkpoint = Checkpoint(db, store, PROJECT, claim, recorded=set())
            checkpoint._buffer.append(_row(line_no))
            assert await checkpoint.flush(finish=True)
            ends.append(checkpoint.finished_batch)
        assert ends == [False, True]

    run_on_database(db_url, scenario)


def test_an_end_with_nothing_left_to_write_or_an_unknown_count(db_url, tmp_path):
    store = LocalBlobStore(tmp_path / "blobs")

    async def scenario(db: Database) -> None:
        first = await _one_shard_claimed(db, 2)
        checkpoint = Checkpoint(db, store, PROJECT, first, recorded=set())
        checkpoint._buffer += [_row(1), _row(2)]
        assert not await checkpoint.flush()  # not the run's end: written, not marked done
        async with db.write() as session:
            await ShardRepository(session).release(first)

        # Claimed again: the start reads what the first claim recorded.
        again = await claim_shard(db, "replica-b", T0 + 1)
        assert again is not None and again.fence == 2
        async with db.write() as session:
            _, done = await shard_start(session, again)
        assert done == {1, 2}
        lost_count = Checkpoint(db, store, PROJECT, again, recorded=None)
        assert not await lost_count.flush(finish=True)  # its caller counts the lines instead
        assert (await _shard(db)).status == ShardStatus.RUNNING
        knows = Checkpoint(db, store, PROJECT, again, recorded=done)
        assert await knows.flush(finish=True)  # no rows: the end alone
        assert (await _shard(db)).status == ShardStatus.DONE
        assert knows.finished_batch is None  # nor the batch's: its caller's own transaction

    run_on_database(db_url, scenario)


def test_batch_steps_are_looked_for_after_a_wake_or_a_poll_interval():
    worker = Worker(cast(Any, None))
    assert worker._take_batch_steps_due(T0)  # the first turn
    assert not worker._take_batch_steps_due(T0 + 0.1)  # e.g. a shard ended: shards only
    assert worker._take_batch_steps_due(T0 + IDLE_POLL_SECONDS)  # the poll
    assert not worker._take_batch_steps_due(T0 + IDLE_POLL_SECONDS + 0.1)
    worker.wake()  # a batch created or cancelled through this replica
    assert worker._take_batch_steps_due(T0 + IDLE_POLL_SECONDS + 0.2)


def test_a_write_starts_at_the_bytes_bound_before_the_rows_bound(db_url, tmp_path, monkeypatch: pytest.MonkeyPatch):
    store = LocalBlobStore(tmp_path / "blobs")
    monkeypatch.setattr(checkpoint_module, "FLUSH_BYTES", 2000)

    def outcome(line_no: int) -> LineOutcome:
        return LineOutcome(line_no, True, {"custom_id": f"c{line_no}", "pad": "x" * 900}, Usage(1, 1))

    async def scenario(db: Database) -> None:
        claim = await _one_shard_claimed(db, 4)
        checkpoint = Checkpoint(db, store, PROJECT, claim, recorded=set())
        await checkpoint.add(outcome(1))
        await checkpoint.add(outcome(2))
        assert checkpoint._background is None  # about 1,900 bytes, 2 rows: below both bounds
        await checkpoint.add(outcome(3))
        assert checkpoint._background is not None
        await checkpoint._background
        assert checkpoint._recorded == {1, 2, 3} and checkpoint._buffered_bytes == 0
        await checkpoint.add(outcome(4))
        assert await checkpoint.flush(finish=True)
        assert checkpoint._recorded == {1, 2, 3, 4}
        async with db.read() as session:
            assert len(await ShardRepository(session).finished_line_numbers(claim)) == 4

    run_on_database(db_url, scenario)


def test_only_lines_that_may_share_a_prefix_are_grouped_in_a_shard():
    settings = SimpleNamespace(shard_lines=1000)
    run = ShardRun(cast(Any, SimpleNamespace(settings=settings)), cast(Any, None))

    def batch(endpoint: str = "/v1/chat/completions", total: int = 500, **fields: Any) -> Any:
        return SimpleNamespace(
            **{"endpoint": endpoint, "total": total, "ordered_input": None, "api": BatchApi.OPENAI, **fields}
        )

    assert run._regroups(batch())  # one shard: too small for an ordered copy
    assert not run._regroups(batch(total=20_000))  # no copy: validation found no shared prefix
    assert not run._regroups(batch(total=20_000, ordered_input="ordered-b1"))  # in its order already
    assert not run._regroups(batch("/v1/embeddings"))
    assert run._regroups(batch("/v1/messages", total=20_000, api=BatchApi.ANTHROPIC))


def test_checkpoint_writes_add_up_in_their_minute_of_usage(db_url, tmp_path):
    """The checkpoint's prebuilt statements (counters, chunk, usage upsert) add, not overwrite."""
    store = LocalBlobStore(tmp_path / "blobs")

    async def scenario(db: Database) -> None:
        claim = await _one_shard_claimed(db, 3)
        usage = UsageKey(PROJECT, "m", "b1", "chat")
        checkpoint = Checkpoint(db, store, PROJECT, claim, usage, recorded=set())
        checkpoint._buffer += [_row(1), _row(2)]
        await checkpoint.flush()
        checkpoint._buffer.append(_row(3))
        await checkpoint.flush(finish=True)
        async with db.read() as session:
            minutes = (await session.execute(select(UsageMinute))).scalars().all()
            batch = await BatchRepository(session).load("b1")
        # Summed over minutes: the two writes fall into one minute but at a minute's turn.
        sums = [sum(getattr(m, name) for m in minutes) for name in ("requests", "input_tokens", "output_tokens")]
        assert {m.model for m in minutes} == {"m"} and sums == [3, 6, 9]
        assert batch is not None and (batch.completed, batch.input_tokens, batch.output_tokens) == (3, 6, 9)

    run_on_database(db_url, scenario)
