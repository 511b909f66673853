"""Assemble a batch's output and error files from its checkpoint chunks and commit them together
with the terminal status.

Goes shard by shard: a shard whose every line ran is written from its chunks alone (its output
and error lines sorted into line order and joined in bulk, app/worker/chunks.py); for one
with lines that never ran (cancel, expiry), its byte range of the input is streamed beside its
finished lines, so those get their `batch_cancelled` / `batch_expired` error line. A batch
created with `output_order: "input"` that runs from a prefix-ordered copy has its shards' lines
put back in input order instead: each shard sorted by input position, then a merge of the
shards (app/pipeline/input_order.py). File ids derive from the batch id, so a finalize retried
after a crash overwrites its own blobs instead of leaving orphans; the files and the status land
in one transaction.

The chunks stay (until the batch is deleted or its results expire), with one more for the lines
that never ran: the results endpoint (app/domains/batches/results.py) reads them before and after
the end alike, so a cursor taken while the batch ran goes on after it, and together they hold
what the files do."""

from __future__ import annotations

import asyncio
import hashlib
import time
from array import array
from collections.abc import AsyncGenerator, AsyncIterator, Iterable, Iterator, Sequence
from contextlib import aclosing
from dataclasses import dataclass, field
from itertools import islice

from app.core.batch_kinds import WebhookFamily, kind_of
from app.core.chunk_format import NEVER_RAN_SHARD, encode_line, new_blob_id, pack_line_nos
from app.core.faults import fault_point
from app.core.line_errors import LineErrorCode
from app.core.metrics import SINGLE_REQUEST_SECONDS
from app.core.purposes import OUTPUT_PURPOSE
from app.core.statuses import BatchStatus, WebhookEventType
from app.db.models import Batch, BatchShard, File
from app.db.repositories.batches import BatchRepository, Claim
from app.db.repositories.chunks import ChunkRepository
from app.db.repositories.files import FileRepository
from app.db.repositories.shards import ShardRepository
from app.domains.responses.events import ending_event
from app.domains.webhooks.outbox import enqueue_batch_event
from app.pipeline.input_order import PlacedLine, Positions, SortedRuns, positions_id
from app.pipeline.jsonl import split_lines
from app.pipeline.lines import CANCELLED_MESSAGE, EXPIRED_MESSAGE, custom_id_of, dumps, error_line
from app.schemas.common import MAX_EXPIRY_SECONDS
from app.storage.base import BlobWriter
from app.worker.chunks import NO_LINES, FinishedLine, ShardLines, finished_shards
from app.worker.context import WorkerContext
from app.worker.ordered_input import delete_ordered_input

# terminal status -> code and message for lines that never ran (the statuses it is reached from:
# BATCH_MOVES in app/core/statuses.py)
ENDINGS: dict[BatchStatus, tuple[str, str]] = {
    BatchStatus.COMPLETED: (LineErrorCode.REQUEST_TIMEOUT, "The request did not finish."),
    BatchStatus.CANCELLED: (LineErrorCode.BATCH_CANCELLED, CANCELLED_MESSAGE),
    BatchStatus.EXPIRED: (LineErrorCode.BATCH_EXPIRED, EXPIRED_MESSAGE),
}


def result_file_id(batch_id: str, kind: str) -> str:
    return "file-" + hashlib.sha256(f"{batch_id}:{kind}".encode()).hexdigest()[:32]


@dataclass
class _Assembled:
    output: BlobWriter
    errors: BlobWriter
    # The lines that never ran, as one more checkpoint chunk
    never_ran: BlobWriter
    never_ran_blob: str
    never_ran_ids: array = field(default_factory=lambda: array("I"))

    @property
    def unexecuted(self) -> int:
        return len(self.never_ran_ids)


async def _assemble(ctx: WorkerContext, batch: Batch, code: str, message: str) -> _Assembled:
    # Named up front: on S3 each file streams straight to its final key (no copy at commit).
    never_ran_blob = new_blob_id()
    out = _Assembled(
        ctx.store.new_writer(batch.project, result_file_id(batch.id, "output")),
        ctx.store.new_writer(batch.project, result_file_id(batch.id, "error")),
        ctx.store.new_writer(batch.project, never_ran_blob),
        never_ran_blob=never_ran_blob,
    )
    try:
        async with ctx.db.read() as session:
            spans = await ShardRepository(session).of_batch(batch.id)
        if batch.output_order == "input" and batch.ordered_input is not None:
            await _assemble_in_input_order(ctx, batch, batch.ordered_input, spans, out, code, message)
        else:
            await _assemble_in_shard_order(ctx, batch, spans, out, code, message)
    except BaseException:
        await out.output.discard()
        await out.errors.discard()
        await out.never_ran.discard()
        raise
    return out


async def _assemble_in_shard_order(
    ctx: WorkerContext, batch: Batch, spans: Sequence[BatchShard], out: _Assembled, code: str, message: str
) -> None:
    """Shard by shard, each in line order: the input's order for shards that are ranges of it."""
    async with aclosing(_shards_with_lines(ctx, batch, spans)) as shards:
        async for span, lines in shards:
            if len(lines) == span.lines:  # every line ran: the input need not be read
                for writer, part in zip((out.output, out.errors), lines.files(), strict=True):
                    if part:
                        writer.write(part)
                        await writer.drain()
            else:
                async for row in _merge_with_input(ctx, batch, span, lines, out, code, message):
                    writer = out.output if row.ok else out.errors
                    writer.write(row.line + b"\n")
                    await writer.drain()


async def _assemble_in_input_order(
    ctx: WorkerContext,
    batch: Batch,
    ordered_input: str,
    spans: Sequence[BatchShard],
    out: _Assembled,
    code: str,
    message: str,
) -> None:
    """A prefix-ordered batch's files in input order (app/pipeline/input_order.py): each shard's
    lines placed at their input positions and spooled as a sorted run, then the runs merged."""
    runs = SortedRuns(ctx.data_dir)
    positions = Positions(ctx.store.read(batch.project, positions_id(ordered_input)))
    try:
        async with aclosing(_shards_with_lines(ctx, batch, spans)) as shards:
            async for span, lines in shards:
                # The copy's lines are consecutive, blank-free: a shard's positions are its lines'.
                at = (await positions.take(span.first_line, span.end_line - span.first_line)).tolist()
                first = span.first_line
                if len(lines) == span.lines:
                    placed = [(at[row.line_no - first], row.ok, row.line) for row in lines]
                else:
                    rows = _merge_with_input(ctx, batch, span, lines, out, code, message)
                    placed = [(at[row.line_no - first], row.ok, row.line) async for row in rows]
                await asyncio.to_thread(runs.add_run, placed)
        merged = runs.merged()
        while True:
            output, errors, count = await asyncio.to_thread(_next_merged, merged)
            if not count:
                break
            for writer, part in ((out.output, output), (out.errors, errors)):
                if part:
                    writer.write(part)
                    await writer.drain()
    finally:
        await positions.aclose()
        runs.close()


# Merged lines joined per hop into a thread (the merge is CPU work, off the event loop)
MERGE_BLOCK_LINES = 4096


def _next_merged(merged: Iterator[PlacedLine]) -> tuple[bytes, bytes, int]:
    """The next MERGE_BLOCK_LINES merged lines: (output lines, error lines, how many)."""
    output: list[bytes] = []
    errors: list[bytes] = []
    count = 0
    for _, ok, line in islice(merged, MERGE_BLOCK_LINES):
        (output if ok else errors).append(line + b"\n")
        count += 1
    return b"".join(output), b"".join(errors), count


async def _shards_with_lines(
    ctx: WorkerContext, batch: Batch, spans: Sequence[BatchShard]
) -> AsyncGenerator[tuple[BatchShard, ShardLines], None]:
    """Every shard, in shard order, with its recorded lines (none for a shard with no chunk)."""
    async with aclosing(finished_shards(ctx.db, ctx.store, batch.id, batch.project)) as done:
        finished = await anext(done, None)
        for span in spans:
            lines: ShardLines = NO_LINES
            if finished is not None and finished[0] == span.shard_no:
                lines, finished = finished[1], await anext(done, None)
            yield span, lines


async def _merge_with_input(
    ctx: WorkerContext,
    batch: Batch,
    span: BatchShard,
    lines: Iterable[FinishedLine],
    out: _Assembled,
    code: str,
    message: str,
) -> AsyncIterator[FinishedLine]:
    """A shard some of whose lines never ran: its lines in line order, those that never ran
    given their error line (from the shard's input lines) and recorded in the never-ran chunk."""
    finished = iter(lines)
    row = next(finished, None)
    chunks = ctx.store.read(batch.project, batch.shard_source, span.start_offset, span.end_offset)
    async for line_no, raw in split_lines(chunks, first_line_no=span.first_line):
        if not raw.strip():
            continue
        while row is not None and row.line_no < line_no:
            row = next(finished, None)
        if row is not None and row.line_no == line_no:
            yield row
        else:
            line = dumps(error_line(custom_id_of(raw), code, message)).encode()
            out.never_ran_ids.append(line_no)
            out.never_ran.write(encode_line(line_no, False, line))
            await out.never_ran.drain()
            yield FinishedLine(line_no, False, line)


async def _commit_file(ctx: WorkerContext, batch: Batch, writer: BlobWriter, kind: str, now: int) -> File | None:
    if writer.size == 0:
        await writer.discard()
        return None
    file_id = result_file_id(batch.id, kind)
    await ctx.store.commit(writer, batch.project, file_id)
    return File(
        id=file_id,
        project=batch.project,
        filename=f"{batch.id}_{kind}.jsonl",
        purpose=OUTPUT_PURPOSE,
        bytes=writer.size,
        created_at=now,
        expires_at=now + (batch.output_expires_after or MAX_EXPIRY_SECONDS),
        status="processed",
        sha256=writer.sha256,
    )


async def finalize(ctx: WorkerContext, claim: Claim, batch: Batch, ending: BatchStatus) -> bool:
    """Write the files and move the batch to `ending`. False if its status moved on meanwhile
    (e.g. a cancel arrived during finalizing); the caller re-reads and decides again."""
    code, message = ENDINGS[ending]
    now = int(time.time())
    files: dict[str, File] = {}  # by kind: output, error
    unexecuted = 0
    never_ran: tuple[str, array] | None = None  # the chunk of the lines that never ran
    if batch.in_progress_at is not None:  # never validated: no lines ran, no files
        assembled = await _assemble(ctx, batch, code, message)
        unexecuted = assembled.unexecuted
        for writer, kind in ((assembled.output, "output"), (assembled.errors, "error")):
            file = await _commit_file(ctx, batch, writer, kind, now)
            if file is not None:
                files[kind] = file
        if unexecuted:
            await ctx.store.commit(assembled.never_ran, batch.project, assembled.never_ran_blob)
            never_ran = assembled.never_ran_blob, assembled.never_ran_ids
        else:
            await assembled.never_ran.discard()
    await fault_point("finalizing", ctx.data_dir)
    by_kind = {kind: file.id for kind, file in files.items()}
    batch_kind = kind_of(batch.api)
    event: WebhookEventType | None = None  # a flex request's caller has its answer: no webhook
    if batch_kind.webhooks is WebhookFamily.BATCH:
        event = WebhookEventType.of_ending(ending)
    elif batch_kind.webhooks is WebhookFamily.RESPONSE:  # a background response's response.*, as its result says
        event = await ending_event(ctx.store, batch, ending, by_kind.get("output"), by_kind.get("error"))
    async with ctx.db.write() as session:
        moved = await BatchRepository(session).transition(
            claim,
            status=ending,
            **{f"{ending}_at": now},
            output_file_id=by_kind.get("output"),
            error_file_id=by_kind.get("error"),
            failed=batch.failed + unexecuted,
            unexecuted=unexecuted,
            total=batch.total or batch.completed + batch.failed + unexecuted,
            ordered_input=None,  # the shards' copy is done with (deleted below)
        )
        if moved:
            if event is not None:
                await enqueue_batch_event(session, batch.id, batch.project, event)
            if batch_kind.lane is not None:  # the short-deadline lane's latency, per lane
                SINGLE_REQUEST_SECONDS.labels(batch_kind.lane, ending).observe(max(0, now - batch.created_at))
            file_repo = FileRepository(session)
            for file in files.values():
                await file_repo.add(file)
            if never_ran is not None:  # after the batch row's update, as every chunk (ids in commit order)
                blob_id, line_nos = never_ran
                await ChunkRepository(session).add(
                    batch.id, NEVER_RAN_SHARD, blob_id, pack_line_nos(line_nos), unexecuted
                )
    if not moved and never_ran is not None:
        await ctx.store.delete(batch.project, never_ran[0])
    if moved and batch.ordered_input is not None:  # a crash before this leaves it to the orphan pass
        await delete_ordered_input(ctx.store, batch, batch.ordered_input)
    return moved
