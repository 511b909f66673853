"""Run lines that share a prompt prefix next to each other.

vLLM's prefix cache keeps a shared prefix (a document many questions are asked about) only
while it is in recent use. Lines are read into a bounded buffer and each buffer is run in
lexicographic order of its prompt text, which puts lines with a common prefix side by side.
The output file is keyed by custom_id, so execution order is free; memory stays bounded by the
buffer, not the file."""

from __future__ import annotations

from collections.abc import AsyncIterator

from app.pipeline.lines import InputLine

REORDER_LINES = 4096
REORDER_BYTES = 64 * 1024 * 1024


def prompt_text(body: dict) -> str:
    """The text a line's prompt starts with, in the order the model sees it."""
    if isinstance(body.get("messages"), list):
        parts = []
        for message in body["messages"]:
            content = message.get("content") if isinstance(message, dict) else None
            if isinstance(content, list):
                content = "".join(p.get("text", "") for p in content if isinstance(p, dict))
            parts.append(f"{message.get('role', '') if isinstance(message, dict) else ''}\x00{content or ''}\x00")
        return "".join(parts)
    for key in ("prompt", "input"):
        value = body.get(key)
        if isinstance(value, str):
            return value
        if isinstance(value, list) and value and isinstance(value[0], str):
            return value[0]
    return ""


async def grouped_by_prefix(
    lines: AsyncIterator[InputLine], max_lines: int = REORDER_LINES, max_bytes: int = REORDER_BYTES
) -> AsyncIterator[InputLine]:
    buffer: list[tuple[str, InputLine]] = []
    size = 0

    def drain() -> list[InputLine]:
        buffer.sort(key=lambda item: item[0])
        ordered = [line for _, line in buffer]
        buffer.clear()
        return ordered

    async for line in lines:
        text = prompt_text(line.body)
        buffer.append((text, line))
        size += len(text)
        if len(buffer) >= max_lines or size >= max_bytes:
            size = 0
            for ordered in drain():
                yield ordered
    for ordered in drain():
        yield ordered
