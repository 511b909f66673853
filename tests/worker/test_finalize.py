"""A claimed batch driven to its ending on the real databases (no engine: its lines are already
checkpointed, or never ran). Each ending writes the output and error files from the checkpoint,
an error line for every line that never ran, the counters and the webhook event, in the one
transaction that moves the status; a claim that lost its fence, or a status that moved on
meanwhile, ends nothing."""

from __future__ import annotations

import time

from sqlalchemy import select, update

from app.core import jsonbody
from app.core.chunk_format import decode, unpack_line_nos
from app.core.config import Settings
from app.core.statuses import BatchStatus, ShardStatus, WebhookEventType
from app.db.engine import Database
from app.db.models import Batch, File, WebhookEvent
from app.db.repositories.batches import BatchRepository, LineRow
from app.db.repositories.chunks import ChunkRepository
from app.db.repositories.shards import ShardRepository
from app.engine.boot import NoModels
from app.pipeline.chunk_blobs import chunk_bytes
from app.pipeline.input_order import pack_positions, positions_id
from app.pipeline.shards import cut_shards
from app.storage.local import LocalBlobStore
from app.worker.batch_run import BatchRun
from app.worker.context import WorkerContext
from app.worker.finalize import finalize
from app.worker.ordered_input import ordered_input_id
from tests.support.database import run_on_database as run_on
from tests.worker.support import LEASE, PROJECT, add_batch, add_shards, claim_batch, claim_shard, load, record

CUSTOM_IDS = ["c1", "c2", "c3", "c4"]


def _context(db: Database, tmp_path) -> WorkerContext:
    settings = Settings(data_dir=tmp_path, replica_id="replica-a", lease_seconds=LEASE, shard_lines=2)
    return WorkerContext(db, LocalBlobStore(tmp_path / "blobs"), NoModels(), settings)


async def _batch_with_input(ctx: WorkerContext, batch_id: str, status: BatchStatus, **kwargs) -> None:
    """The batch, its 4-line input (2 shards of 2 lines) and, once it has run, its shards."""
    lines = [{"custom_id": c, "method": "POST", "url": "/v1/chat/completions", "body": {}} for c in CUSTOM_IDS]
    writer = ctx.store.new_writer(PROJECT, "file-in")
    writer.write(b"".join(jsonbody.dumps(line).encode() + b"\n" for line in lines))
    await ctx.store.commit(writer, PROJECT, "file-in")
    await add_batch(ctx.db, batch_id, status, total=len(lines), **kwargs)
    if kwargs.get("in_progress_at") is not None:
        spans = await cut_shards(ctx.store.read(PROJECT, "file-in"), ctx.settings.shard_lines)
        await add_shards(ctx.db, batch_id, spans)


async def _run_lines(ctx: WorkerContext, batch_id: str, line_nos: list[int], done: bool, failed=()) -> None:
    """A replica ran these lines of the batch's next shard (and finished the shard, if `done`)."""
    claim = await claim_shard(ctx.db, "replica-s", time.time(), batch_id=batch_id)
    assert claim is not None
    rows = [LineRow(n, n not in failed, f'{{"custom_id": "c{n}", "ran": true}}') for n in line_nos]
    await record(ctx.db, ctx.store, claim, rows, f"chunk-{claim.shard_no}")
    async with ctx.db.write() as session:
        if done:
            await ShardRepository(session).mark_done(claim, time.time())
        else:  # it stopped (a drain) before the rest
            await ShardRepository(session).release(claim)


async def _drive(ctx: WorkerContext, batch_id: str) -> None:
    claim = await claim_batch(ctx.db, "replica-a", time.time())
    assert claim is not None and claim.batch_id == batch_id
    await BatchRun(ctx, claim).run()


async def _file_lines(ctx: WorkerContext, file_id: str | None) -> list[dict]:
    if file_id is None:
        return []
    data = b"".join([chunk async for chunk in ctx.store.read(PROJECT, file_id)])
    return [jsonbody.loads(line) for line in data.splitlines()]


async def _chunk_lines(ctx: WorkerContext, batch_id: str) -> list[tuple[int, bool, bytes]]:
    """(line_no, ok, line) of every line the batch's chunks hold, in chunk order."""
    async with ctx.db.read() as session:
        chunks = [chunk async for chunk in ChunkRepository(session).of_batch(batch_id)]
    lines = []
    for chunk in sorted(chunks, key=lambda c: c.id):
        data = await chunk_bytes(ctx.store, PROJECT, chunk)
        lines += decode(data, set(unpack_line_nos(chunk.line_nos)))
    return lines


async def _events(db: Database) -> list[tuple[str, str]]:
    async with db.read() as session:
        return [(e.batch_id, e.type) for e in (await session.scalars(select(WebhookEvent))).all()]


async def _file_rows(db: Database) -> list[str]:
    async with db.read() as session:
        return sorted(f.filename for f in (await session.scalars(select(File))).all())


def test_every_shard_done_completes_with_both_files(db_url, tmp_path):
    async def scenario(db: Database) -> None:
        ctx = _context(db, tmp_path)
        await _batch_with_input(ctx, "batch_1", BatchStatus.IN_PROGRESS, in_progress_at=1)
        await _run_lines(ctx, "batch_1", [1, 2], done=True)
        await _run_lines(ctx, "batch_1", [3, 4], done=True, failed={3})
        await _drive(ctx, "batch_1")
        batch = await load(db, "batch_1")
        assert (batch.status, batch.completed, batch.failed, batch.unexecuted) == (BatchStatus.COMPLETED, 3, 1, 0)
        assert batch.completed_at is not None and batch.lease_owner is None
        assert [line["custom_id"] for line in await _file_lines(ctx, batch.output_file_id)] == ["c1", "c2", "c4"]
        assert await _file_lines(ctx, batch.error_file_id) == [{"custom_id": "c3", "ran": True}]
        assert await _file_rows(db) == ["batch_1_error.jsonl", "batch_1_output.jsonl"]
        assert await _events(db) == [("batch_1", WebhookEventType.BATCH_COMPLETED)]
        # Its chunks stay while its results are kept (their expiry: tests/background/test_expiry.py)
        assert len(await _chunk_lines(ctx, "batch_1")) == 4

    run_on(db_url, scenario)


def test_expired_mid_run_ends_the_lines_that_never_ran(db_url, tmp_path):
    async def scenario(db: Database) -> None:
        ctx = _context(db, tmp_path)
        expires_at = int(time.time()) + 2
        await _batch_with_input(ctx, "batch_1", BatchStatus.IN_PROGRESS, in_progress_at=1, expires_at=expires_at)
        await _run_lines(ctx, "batch_1", [1, 2], done=True)
        await _run_lines(ctx, "batch_1", [3], done=False)
        async with db.write() as session:  # wait for the expiry without waiting
            await session.execute(update(Batch).values(expires_at=int(time.time()) - 1))
        await _drive(ctx, "batch_1")
        batch = await load(db, "batch_1")
        assert (batch.status, batch.completed, batch.failed, batch.unexecuted) == (BatchStatus.EXPIRED, 3, 1, 1)
        assert [line["custom_id"] for line in await _file_lines(ctx, batch.output_file_id)] == ["c1", "c2", "c3"]
        errors = await _file_lines(ctx, batch.error_file_id)
        assert [(e["custom_id"], e["response"], e["error"]["code"]) for e in errors] == [("c4", None, "batch_expired")]
        assert await _events(db) == [("batch_1", WebhookEventType.BATCH_EXPIRED)]

    run_on(db_url, scenario)


def test_cancelled_before_it_ran_has_no_files(db_url, tmp_path):
    """Cancelled while validating: no line ran, so no file is written and none is named."""

    async def scenario(db: Database) -> None:
        ctx = _context(db, tmp_path)
        await _batch_with_input(ctx, "batch_1", BatchStatus.VALIDATING)
        async with db.write() as session:
            assert await BatchRepository(session).request_cancel(PROJECT, "batch_1", int(time.time()))
        await _drive(ctx, "batch_1")
        batch = await load(db, "batch_1")
        assert (batch.status, batch.output_file_id, batch.error_file_id) == (BatchStatus.CANCELLED, None, None)
        assert batch.cancelled_at is not None
        assert await _file_rows(db) == []
        assert await _events(db) == [("batch_1", WebhookEventType.BATCH_CANCELLED)]

    run_on(db_url, scenario)


def test_cancelled_mid_run_errors_every_line_not_run(db_url, tmp_path):
    async def scenario(db: Database) -> None:
        ctx = _context(db, tmp_path)
        await _batch_with_input(ctx, "batch_1", BatchStatus.IN_PROGRESS, in_progress_at=1)
        await _run_lines(ctx, "batch_1", [1], done=False)
        async with db.write() as session:
            assert await BatchRepository(session).request_cancel(PROJECT, "batch_1", int(time.time()))
        await _drive(ctx, "batch_1")
        batch = await load(db, "batch_1")
        assert (batch.status, batch.completed, batch.failed, batch.unexecuted) == (BatchStatus.CANCELLED, 1, 3, 3)
        errors = await _file_lines(ctx, batch.error_file_id)
        assert [(e["custom_id"], e["error"]["code"]) for e in errors] == [
            ("c2", "batch_cancelled"),
            ("c3", "batch_cancelled"),
            ("c4", "batch_cancelled"),
        ]
        assert await _events(db) == [("batch_1", WebhookEventType.BATCH_CANCELLED)]
        # The chunks stay (the results endpoint reads them), one more holding the lines never run
        chunks = await _chunk_lines(ctx, "batch_1")
        assert chunks == [(1, True, b'{"custom_id": "c1", "ran": true}')] + [
            (n, False, jsonbody.dumps(e).encode()) for n, e in zip((2, 3, 4), errors, strict=True)
        ]

    run_on(db_url, scenario)


def test_a_running_batch_without_shards_gets_them_and_stays_running(db_url, tmp_path):
    """A batch that started before shards existed: the claim cuts its input into shards and
    leaves it running (for any replica's shard claims), its lease released."""

    async def scenario(db: Database) -> None:
        ctx = _context(db, tmp_path)
        await _batch_with_input(ctx, "batch_1", BatchStatus.VALIDATING)
        async with db.write() as session:
            await session.execute(update(Batch).values(status=BatchStatus.IN_PROGRESS, in_progress_at=1))
        await _drive(ctx, "batch_1")
        batch = await load(db, "batch_1")
        assert (batch.status, batch.lease_owner, batch.output_file_id) == (BatchStatus.IN_PROGRESS, None, None)
        async with db.read() as session:
            shards = await ShardRepository(session).of_batch("batch_1")
        assert [(s.first_line, s.end_line, s.status) for s in shards] == [
            (1, 3, ShardStatus.PENDING),
            (3, 5, ShardStatus.PENDING),
        ]
        assert await claim_batch(db, "replica-b", time.time()) is None  # nothing left for one replica
        assert await _events(db) == []

    run_on(db_url, scenario)


def test_a_stale_claim_or_a_cancel_meanwhile_ends_nothing(db_url, tmp_path):
    async def scenario(db: Database) -> None:
        ctx = _context(db, tmp_path)
        await _batch_with_input(ctx, "batch_1", BatchStatus.IN_PROGRESS, in_progress_at=1)
        await _run_lines(ctx, "batch_1", [1, 2], done=True)
        await _run_lines(ctx, "batch_1", [3, 4], done=True)
        async with db.write() as session:
            assert await BatchRepository(session).finish_running("batch_1", int(time.time()))
        stale = await claim_batch(db, "replica-a", time.time())
        assert stale is not None
        fresh = await claim_batch(db, "replica-b", time.time() + 2 * LEASE)
        assert fresh is not None and fresh.taken_over
        assert not await finalize(ctx, stale, await load(db, "batch_1"), BatchStatus.COMPLETED)
        batch = await load(db, "batch_1")
        assert (batch.status, batch.output_file_id) == (BatchStatus.FINALIZING, None)
        assert (await _file_rows(db), await _events(db)) == ([], [])

        # The holder's finalize finds the status moved on (a cancel arrived) and ends nothing;
        # driving the batch again ends it as cancelled, with the lines that ran.
        async with db.write() as session:
            assert await BatchRepository(session).request_cancel(PROJECT, "batch_1", int(time.time()))
        assert not await finalize(ctx, fresh, await load(db, "batch_1"), BatchStatus.COMPLETED)
        assert (await load(db, "batch_1")).status == BatchStatus.CANCELLING
        await BatchRun(ctx, fresh).run()
        batch = await load(db, "batch_1")
        assert (batch.status, batch.completed, batch.unexecuted) == (BatchStatus.CANCELLED, 4, 0)
        assert len(await _file_lines(ctx, batch.output_file_id)) == 4
        assert await _events(db) == [("batch_1", WebhookEventType.BATCH_CANCELLED)]

    run_on(db_url, scenario)


def test_input_order_puts_a_prefix_ordered_batch_s_lines_back_in_input_order(db_url, tmp_path):
    """`output_order: "input"` with an ordered copy: the shards are copy ranges (the copy in an
    order of its own, 2 lines a shard) and the files list lines in input order, whatever shard
    they ran in; lines that never ran get their batch_expired error line in their input place;
    the never-ran chunk counts copy lines, as every chunk; the copy and its positions go."""
    copy_order = [2, 4, 6, 1, 3, 5]  # input line numbers, in copy order

    async def scenario(db: Database) -> None:
        ctx = _context(db, tmp_path)
        raw = [
            jsonbody.dumps({"custom_id": f"c{n}", "method": "POST", "url": "/v1/chat/completions", "body": {}})
            for n in copy_order
        ]
        ordered = ordered_input_id("batch_1")
        for blob_id, data in (
            (ordered, "".join(line + "\n" for line in raw).encode()),
            (positions_id(ordered), pack_positions(copy_order)),
        ):
            writer = ctx.store.new_writer(PROJECT, blob_id)
            writer.write(data)
            await ctx.store.commit(writer, PROJECT, blob_id)
        await add_batch(
            ctx.db,
            "batch_1",
            BatchStatus.IN_PROGRESS,
            total=6,
            in_progress_at=1,
            output_order="input",
            ordered_input=ordered,
        )
        await add_shards(
            ctx.db, "batch_1", await cut_shards(ctx.store.read(PROJECT, ordered), ctx.settings.shard_lines)
        )

        async def run(copy_lines: list[int], done: bool, failed=()) -> None:
            claim = await claim_shard(ctx.db, "replica-s", time.time(), batch_id="batch_1")
            assert claim is not None
            rows = [
                LineRow(n, copy_order[n - 1] not in failed, f'{{"custom_id": "c{copy_order[n - 1]}", "ran": true}}')
                for n in copy_lines
            ]
            await record(ctx.db, ctx.store, claim, rows, f"chunk-{claim.shard_no}")
            async with ctx.db.write() as session:
                if done:
                    await ShardRepository(session).mark_done(claim, time.time())
                else:
                    await ShardRepository(session).release(claim)

        await run([1, 2], done=True, failed={4})  # c2, c4 (failed)
        await run([3], done=False)  # c6; c1 never ran; the last shard (c3, c5) never started
        async with db.write() as session:
            await session.execute(update(Batch).values(expires_at=int(time.time()) - 1))
        await _drive(ctx, "batch_1")
        batch = await load(db, "batch_1")
        assert (batch.status, batch.completed, batch.failed, batch.unexecuted) == (BatchStatus.EXPIRED, 2, 4, 3)
        assert [line["custom_id"] for line in await _file_lines(ctx, batch.output_file_id)] == ["c2", "c6"]
        errors = [
            (e["custom_id"], (e.get("error") or {}).get("code")) for e in await _file_lines(ctx, batch.error_file_id)
        ]
        assert errors == [("c1", "batch_expired"), ("c3", "batch_expired"), ("c4", None), ("c5", "batch_expired")]
        never_ran = [(n, ok) for n, ok, _ in await _chunk_lines(ctx, "batch_1")][-3:]
        assert never_ran == [(4, False), (5, False), (6, False)]  # copy lines, as the shards count them
        assert batch.ordered_input is None
        for blob_id in (ordered, positions_id(ordered)):
            assert not await ctx.store.exists(PROJECT, blob_id)

    run_on(db_url, scenario)
