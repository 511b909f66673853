"""Run lines that share a prompt prefix next to each other, inside a bounded buffer: a shard
whose batch has no prefix-ordered copy (one shard's worth of lines, or shards cut before
ordered copies existed). Each buffer runs in the order of app/pipeline/prefix_order.py's keys,
the order a whole batch gets; the output file is keyed by custom_id, so execution order is free;
memory stays bounded by the buffer, not the file. Lines naming a LoRA adapter and lines naming its
base (one batch, one engine) are grouped by model first, so each model's lines reach the engine together."""

from __future__ import annotations

from collections.abc import AsyncIterator

from app.core.endpoints import MESSAGES, RESPONSES
from app.pipeline.lines import InputLine
from app.pipeline.prefix_order import PREFIX_ENDPOINTS, key_and_size

# Lines with a prompt an engine keeps a prefix of; the others (embeddings, score, rerank, audio)
# gain nothing from grouping: its keys were 2 % of W8's embedding run.
GROUPED_ENDPOINTS = PREFIX_ENDPOINTS | {RESPONSES, MESSAGES}
REORDER_LINES = 4096
REORDER_BYTES = 64 * 1024 * 1024


async def grouped_by_prefix(
    lines: AsyncIterator[InputLine], max_lines: int = REORDER_LINES, max_bytes: int = REORDER_BYTES
) -> AsyncIterator[InputLine]:
    buffer: list[tuple[tuple[str, int], InputLine]] = []
    size = 0

    def drain() -> list[InputLine]:
        buffer.sort(key=lambda item: item[0])
        ordered = [line for _, line in buffer]
        buffer.clear()
        return ordered

    async for line in lines:
        key, prompt_bytes = key_and_size(line.body)
        buffer.append(((str(line.body.get("model") or ""), key), line))
        size += prompt_bytes
        if len(buffer) >= max_lines or size >= max_bytes:
            size = 0
            for ordered in drain():
                yield ordered
    for ordered in drain():
        yield ordered
