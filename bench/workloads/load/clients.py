"""The load test's clients, a bounded asyncio harness: N clients, each looping over a weighted mix of API calls
(uploads, lists, retrieves, downloads, batch creates, retrieves and cancels) for a fixed time,
with a short think time between calls. Latency is recorded per operation; a 503 with
Retry-After is retried after the time it asks for and counted, anything else non-2xx is an error.
Everything created is remembered so the run can be verified afterwards (bench/workloads/load/verify.py)."""

from __future__ import annotations

import asyncio
import hashlib
import json
import random
import time
from collections import defaultdict
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field

import openai

from harness.client import async_openai_client

CHAT_MODEL = "batchd-tiny-chat"
# Operation -> relative weight in each client's mix.
MIX = {
    "files.create": 8,
    "files.list": 10,
    "files.retrieve": 12,
    "files.content": 10,
    "uploads.chunked": 2,
    "batches.create": 6,
    "batches.retrieve": 30,
    "batches.list": 8,
    "batches.cancel": 2,
}
MAX_503_RETRIES = 20


@dataclass
class LoadConfig:
    clients: int = 50
    duration_s: float = 120.0
    think_s: float = 0.25
    lines_per_batch: int = 8
    max_tokens: int = 16
    seed: int = 0


@dataclass
class Stats:
    latencies: dict[str, list[float]] = field(default_factory=lambda: defaultdict(list))
    errors: list[str] = field(default_factory=list)
    retried_503: dict[str, int] = field(default_factory=lambda: defaultdict(int))
    # A cancel that raced the batch's own completion: OpenAI's documented 409, not an error.
    cancel_conflicts: int = 0
    files: dict[str, str] = field(default_factory=dict)  # file id -> sha256 of what was sent
    batches: dict[str, int] = field(default_factory=dict)  # batch id -> lines
    cancelled: set[str] = field(default_factory=set)
    # (seconds since start, operation, latency in seconds) for every successful call
    timeline: list[tuple[float, str, float]] = field(default_factory=list)


def batch_input(rng: random.Random, tag: str, lines: int, max_tokens: int) -> bytes:
    rows = [
        {
            "custom_id": f"{tag}-{i}",
            "method": "POST",
            "url": "/v1/chat/completions",
            "body": {
                "model": CHAT_MODEL,
                "max_tokens": max_tokens,
                "temperature": 0,
                "messages": [{"role": "user", "content": f"Tell me about {rng.randrange(10**6)}"}],
            },
        }
        for i in range(lines)
    ]
    return b"".join(json.dumps(row).encode() + b"\n" for row in rows)


class Client:
    """One simulated user with its own connection pool and view of what it created."""

    def __init__(self, index: int, base_url: str, api_key: str, config: LoadConfig, stats: Stats, t0: float):
        self.index = index
        self.api = async_openai_client(base_url, api_key, timeout=120)
        self.config = config
        self.stats = stats
        self.t0 = t0
        self.rng = random.Random(config.seed * 1000 + index)
        self.files: list[str] = []
        self.batch_files: list[str] = []
        self.batches: list[str] = []
        self.calls = 0

    async def _call(self, op: str, fn: Callable[[], Awaitable]):
        for _ in range(MAX_503_RETRIES):
            start = time.perf_counter()
            try:
                result = await fn()
            except openai.APIStatusError as exc:
                if exc.status_code == 503 and exc.response.headers.get("retry-after"):
                    self.stats.retried_503[op] += 1
                    await asyncio.sleep(float(exc.response.headers["retry-after"]))
                    continue
                if op == "batches.cancel" and exc.status_code == 409:
                    self.stats.cancel_conflicts += 1
                    return None
                self.stats.errors.append(f"{op}: {exc.status_code} {str(exc)[:300]}")
                return None
            except openai.APIError as exc:  # connection errors, timeouts
                self.stats.errors.append(f"{op}: {type(exc).__name__} {str(exc)[:300]}")
                return None
            elapsed = time.perf_counter() - start
            self.stats.latencies[op].append(elapsed)
            self.stats.timeline.append((time.perf_counter() - self.t0, op, elapsed))
            return result
        self.stats.errors.append(f"{op}: still 503 after {MAX_503_RETRIES} retries")
        return None

    def _pick(self) -> str:
        ops = list(MIX)
        if not self.files:
            return "files.create"
        if not self.batches and self.batch_files:
            return "batches.create"
        return self.rng.choices(ops, weights=[MIX[o] for o in ops])[0]

    async def step(self) -> None:
        op = self._pick()
        await getattr(self, "op_" + op.replace(".", "_"))(op)
        self.calls += 1

    async def op_files_create(self, op: str) -> None:
        data = batch_input(self.rng, f"c{self.index}f{self.calls}", self.config.lines_per_batch, self.config.max_tokens)
        file = await self._call(op, lambda: self.api.files.create(file=("input.jsonl", data), purpose="batch"))
        if file is not None:
            self.stats.files[file.id] = hashlib.sha256(data).hexdigest()
            self.files.append(file.id)
            self.batch_files.append(file.id)

    async def op_uploads_chunked(self, op: str) -> None:
        data = batch_input(self.rng, f"c{self.index}u{self.calls}", self.config.lines_per_batch, self.config.max_tokens)
        upload = await self._call(
            op,
            lambda: self.api.uploads.upload_file_chunked(
                file=data,
                filename="parts.jsonl",
                bytes=len(data),
                mime_type="text/jsonl",
                purpose="batch",
                part_size=len(data) // 3 + 1,
            ),
        )
        if upload is not None:
            self.stats.files[upload.file.id] = hashlib.sha256(data).hexdigest()
            self.files.append(upload.file.id)
            self.batch_files.append(upload.file.id)

    async def op_files_list(self, op: str) -> None:
        await self._call(op, lambda: self.api.files.list(limit=20))

    async def op_files_retrieve(self, op: str) -> None:
        file_id = self.rng.choice(self.files)
        await self._call(op, lambda: self.api.files.retrieve(file_id))

    async def op_files_content(self, op: str) -> None:
        file_id = self.rng.choice(self.files)
        response = await self._call(op, lambda: self.api.files.content(file_id))
        if response is not None and hashlib.sha256(response.content).hexdigest() != self.stats.files[file_id]:
            self.stats.errors.append(f"{op}: {file_id} came back with other bytes")

    async def op_batches_create(self, op: str) -> None:
        if not self.batch_files:
            return await self.op_files_create("files.create")
        file_id = self.batch_files.pop(0)
        batch = await self._call(
            op,
            lambda: self.api.batches.create(
                input_file_id=file_id, endpoint="/v1/chat/completions", completion_window="24h"
            ),
        )
        if batch is not None:
            self.stats.batches[batch.id] = self.config.lines_per_batch
            self.batches.append(batch.id)

    async def op_batches_retrieve(self, op: str) -> None:
        if self.batches:
            batch_id = self.rng.choice(self.batches)
            await self._call(op, lambda: self.api.batches.retrieve(batch_id))

    async def op_batches_list(self, op: str) -> None:
        await self._call(op, lambda: self.api.batches.list(limit=20))

    async def op_batches_cancel(self, op: str) -> None:
        candidates = [b for b in self.batches if b not in self.stats.cancelled]
        if candidates:
            batch_id = self.rng.choice(candidates)
            self.stats.cancelled.add(batch_id)
            await self._call(op, lambda: self.api.batches.cancel(batch_id))

    async def run(self, deadline: float) -> None:
        # Start staggered so 50 clients do not all upload in the same millisecond.
        await asyncio.sleep(self.rng.uniform(0, self.config.think_s * 2))
        while time.perf_counter() < deadline:
            await self.step()
            await asyncio.sleep(self.rng.uniform(0, 2 * self.config.think_s))
        await self.api.close()


async def run_load(base_url: str, api_key: str, config: LoadConfig) -> Stats:
    stats = Stats()
    t0 = time.perf_counter()
    clients = [Client(i, base_url, api_key, config, stats, t0) for i in range(config.clients)]
    deadline = t0 + config.duration_s
    await asyncio.gather(*(client.run(deadline) for client in clients))
    return stats


def percentiles(values: list[float]) -> dict[str, float | None]:
    """p50/p95/p99 (nearest rank) in milliseconds."""
    ordered = sorted(values)
    if not ordered:
        return {"n": 0, "p50": None, "p95": None, "p99": None, "max": None}

    def rank(p: float) -> float:
        return ordered[min(len(ordered) - 1, max(0, int(round(p / 100 * len(ordered) + 0.5)) - 1))] * 1000

    return {"n": len(ordered), "p50": rank(50), "p95": rank(95), "p99": rank(99), "max": ordered[-1] * 1000}
