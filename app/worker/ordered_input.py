"""A validated batch's lines copied out in prompt-prefix order (app/pipeline/prefix_order.py),
and its shards cut from that copy, so one shard holds whole prefix groups.

Only batches that gain from it get a copy: lines with a prompt (chat, completions) and more than
one shard's worth of them; the others' shards stay byte ranges of the input file. The copy's name
derives from the batch id, so a validation retried after a crash overwrites its own copy; the
batch row names it while the batch runs (so the orphan pass keeps it) and finalize deletes it."""

from __future__ import annotations

import asyncio
from collections.abc import Iterator
from itertools import islice

from app.core.batch_kinds import BatchKind
from app.db.models import Batch
from app.db.repositories.shards import ShardSpan
from app.pipeline.prefix_order import PREFIX_ENDPOINTS, PrefixOrder
from app.pipeline.shards import ShardCutter
from app.storage.base import BlobStore

ORDERED_PREFIX = "ordered-"
# Lines copied per hop into a thread (CPU work off the event loop)
COPY_BLOCK_LINES = 4096


def ordered_input_id(batch_id: str) -> str:
    return f"{ORDERED_PREFIX}{batch_id}"


def wants_order(batch: Batch, kind: BatchKind) -> bool:
    """Whether the batch's lines are worth ordering (a Message Batch's results keep input order,
    as do those of a batch created with `output_order: "input"`: its shards stay ranges of the
    input, so finalize, shard by shard in line order, streams its files in input order)."""
    return batch.endpoint in PREFIX_ENDPOINTS and kind.ordered_copy and batch.output_order != "input"


def _block(lines: Iterator[tuple[int, bytes]], cutter: ShardCutter, first_line: int, offset: int) -> tuple[bytes, int]:
    """The next COPY_BLOCK_LINES lines as one byte run, fed to the cutter; (bytes, lines)."""
    parts = []
    for n, (_, line) in enumerate(islice(lines, COPY_BLOCK_LINES)):
        cutter.add(first_line + n, offset)
        parts.append(line)
        offset += len(line) + 1
    if not parts:
        return b"", 0
    return b"\n".join(parts) + b"\n", len(parts)


async def write_ordered_input(
    store: BlobStore, batch: Batch, order: PrefixOrder, shard_lines: int
) -> tuple[str, list[ShardSpan]]:
    """Commit the ordered copy; its id and the shards cut from it."""
    blob_id = ordered_input_id(batch.id)
    writer = store.new_writer(batch.project, blob_id)
    cutter = ShardCutter(shard_lines)
    lines = order.lines()
    line_no = 1
    try:
        while True:
            data, count = await asyncio.to_thread(_block, lines, cutter, line_no, writer.size)
            if not count:
                break
            writer.write(data)
            await writer.drain()
            line_no += count
        await store.commit(writer, batch.project, blob_id)
    except BaseException:
        await writer.discard()
        raise
    finally:
        lines.close()
    return blob_id, cutter.spans()
