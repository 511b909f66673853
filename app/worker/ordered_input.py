"""A validated batch's lines copied out in prompt-prefix order (app/pipeline/prefix_order.py),
and its shards cut from that copy, so one shard holds whole prefix groups.

Only batches that gain from it get a copy: lines with a prompt (chat, completions) and more than
one shard's worth of them; the others' shards stay byte ranges of the input file. The copy's name
derives from the batch id, so a validation retried after a crash overwrites its own copy; the
batch row names it while the batch runs (so the orphan pass keeps it) and finalize deletes it.
A batch created with `output_order: "input"` also gets the copy's positions (the input line
number of each copied line, app/pipeline/input_order.py), kept and deleted with it, from which
finalize lists its files in input order."""

from __future__ import annotations

import asyncio
from collections.abc import Iterator
from itertools import islice

from app.core.batch_kinds import BatchKind
from app.db.models import Batch
from app.db.repositories.shards import ShardSpan
from app.pipeline.input_order import pack_positions, positions_id
from app.pipeline.prefix_order import PREFIX_ENDPOINTS, PrefixOrder
from app.pipeline.shards import ShardCutter
from app.storage.base import BlobStore

ORDERED_PREFIX = "ordered-"
# Lines copied per hop into a thread (CPU work off the event loop)
COPY_BLOCK_LINES = 4096


def ordered_input_id(batch_id: str) -> str:
    return f"{ORDERED_PREFIX}{batch_id}"


def wants_order(batch: Batch, kind: BatchKind) -> bool:
    """Whether the batch's lines are worth ordering (a Message Batch's results keep input order:
    its lines run in it; a batch created with `output_order: "input"` is ordered, its files are
    put back in input order at finalize)."""
    return batch.endpoint in PREFIX_ENDPOINTS and kind.ordered_copy


def _block(
    lines: Iterator[tuple[int, bytes]], cutter: ShardCutter, first_line: int, offset: int
) -> tuple[bytes, bytes, int]:
    """The next COPY_BLOCK_LINES lines as one byte run, fed to the cutter, and their input line
    numbers packed as positions; (bytes, positions, lines)."""
    parts = []
    line_nos = []
    for n, (line_no, line) in enumerate(islice(lines, COPY_BLOCK_LINES)):
        cutter.add(first_line + n, offset)
        parts.append(line)
        line_nos.append(line_no)
        offset += len(line) + 1
    if not parts:
        return b"", b"", 0
    return b"\n".join(parts) + b"\n", pack_positions(line_nos), len(parts)


async def write_ordered_input(
    store: BlobStore, batch: Batch, order: PrefixOrder, shard_lines: int
) -> tuple[str, list[ShardSpan]]:
    """Commit the ordered copy (and, for a batch whose files keep input order, its positions);
    its id and the shards cut from it."""
    blob_id = ordered_input_id(batch.id)
    writer = store.new_writer(batch.project, blob_id)
    positions = store.new_writer(batch.project, positions_id(blob_id)) if batch.output_order == "input" else None
    cutter = ShardCutter(shard_lines)
    lines = order.lines()
    line_no = 1
    try:
        while True:
            data, packed, count = await asyncio.to_thread(_block, lines, cutter, line_no, writer.size)
            if not count:
                break
            writer.write(data)
            await writer.drain()
            if positions is not None:
                positions.write(packed)
                await positions.drain()
            line_no += count
        if positions is not None:  # first: a copy is never named without its positions
            await store.commit(positions, batch.project, positions_id(blob_id))
        await store.commit(writer, batch.project, blob_id)
    except BaseException:
        await writer.discard()
        if positions is not None:
            await positions.discard()
        raise
    finally:
        lines.close()
    return blob_id, cutter.spans()


async def delete_ordered_input(store: BlobStore, batch: Batch, blob_id: str) -> None:
    """The copy, and its positions if the batch has them."""
    await store.delete(batch.project, blob_id)
    if batch.output_order == "input":
        await store.delete(batch.project, positions_id(blob_id))
