"""After a load run: nothing lost. Every created batch reaches a terminal status with each of
its custom_ids exactly once across its output and error files (cancelled lines included, as
`batch_cancelled`), and every uploaded file downloads byte-identical."""

from __future__ import annotations

import asyncio
import hashlib
import json
import time

import openai

from bench.workloads.load.clients import Stats
from harness.client import async_openai_client
from harness.poll import TERMINAL


async def _lines(api: openai.AsyncOpenAI, file_id: str | None) -> list[dict]:
    if file_id is None:
        return []
    # Newlines only: str.splitlines also splits a JSON string at U+2028 and the like.
    return [json.loads(line) for line in (await api.files.content(file_id)).text.split("\n") if line]


async def verify(base_url: str, api_key: str, stats: Stats, timeout_s: float = 900, concurrency: int = 8) -> dict:
    api = async_openai_client(base_url, api_key, max_retries=10, timeout=120)
    problems: list[str] = []
    gate = asyncio.Semaphore(concurrency)
    statuses: dict[str, str] = {}
    start = time.perf_counter()

    async def settle(batch_id: str, lines: int) -> None:
        while True:
            async with gate:
                batch = await api.batches.retrieve(batch_id)
            if batch.status in TERMINAL:
                break
            if time.perf_counter() - start > timeout_s:
                problems.append(f"{batch_id} still {batch.status} after {timeout_s:.0f} s")
                return
            await asyncio.sleep(1)
        statuses[batch_id] = batch.status
        if batch.status == "failed":
            problems.append(f"{batch_id} failed: {batch.errors}")
            return
        if batch.status == "cancelled" and batch.in_progress_at is None:
            # Cancelled before validation finished: no line ran and, as on OpenAI, no files.
            expected = 0
            statuses[batch_id] = "cancelled before validation"
        else:
            expected = lines
        async with gate:
            rows = await _lines(api, batch.output_file_id) + await _lines(api, batch.error_file_id)
        ids = sorted(row["custom_id"] for row in rows)
        if len(ids) != expected or len(set(ids)) != expected:
            problems.append(
                f"{batch_id} ({batch.status}): {len(ids)} result lines, {len(set(ids))} distinct, expected {expected}"
            )
        counts = batch.request_counts
        assert counts is not None, batch_id  # batchd always sends them
        if counts.total != expected or counts.completed + counts.failed != expected:
            problems.append(f"{batch_id} ({batch.status}): request_counts {counts}")

    async def round_trip(file_id: str, sha256: str) -> None:
        async with gate:
            data = (await api.files.content(file_id)).content
        if hashlib.sha256(data).hexdigest() != sha256:
            problems.append(f"file {file_id} does not round-trip")

    await asyncio.gather(*(settle(b, n) for b, n in stats.batches.items()))
    drain_s = time.perf_counter() - start
    await asyncio.gather(*(round_trip(f, h) for f, h in stats.files.items()))
    await api.close()
    by_status: dict[str, int] = {}
    for status in statuses.values():
        by_status[status] = by_status.get(status, 0) + 1
    return {
        "problems": problems,
        "batches": len(stats.batches),
        "batches_by_status": by_status,
        "files_checked": len(stats.files),
        "drain_s": round(drain_s, 1),
    }
