"""W8 by layer: the CPU one upstream request costs at each layer of batchd's line path, in one
process, against the same zero-latency fake fleet, so the difference between two layers is
what the outer one adds.

- ``aiohttp``: ``session.post`` + read + ``orjson.loads`` (the bare client's request);
- ``aiohttp+timeout``: the same with a ``ClientTimeout`` per request, as batchd sends;
- ``send``: ``app.engine.upstream.transport.send`` (URL choice, retries, body classification);
- ``registry``: ``UpstreamRegistry.execute`` (model lookup, the body re-serialised, abort tracking, usage);
- ``executor``: ``LineExecutor.run`` (fair gate, metrics, the result line), no database.

The driver is pinned to CPU 0 and the fleet to CPU 1; 4 URLs x 32 requests at once; layers
interleaved and their order rotated each round; CPU from getrusage over each run.

    .venv/bin/python -m bench --workloads W8-layers [--scale 1.0] [--rounds 3]

``--scale`` multiplies the 20,000 requests of each run.
"""

from __future__ import annotations

import asyncio
import json
import os
import statistics
import time
from collections.abc import AsyncIterator, Awaitable, Callable
from typing import Any, ClassVar

import aiohttp
import orjson
import uvloop

from app.engine.config.upstream import UpstreamSpec
from app.engine.upstream.registry import UpstreamRegistry
from app.pipeline.executor import LineExecutor, LineOutcome
from app.pipeline.lines import InputLine
from bench.compare import median_same_round_ratio
from bench.measure import cpu_seconds
from bench.report import Document, Report
from bench.workload import Context, NoParams, rotated
from harness.fake_fleet import FakeFleet

REQUESTS = 20_000
URLS, PER_URL = 4, 32
MODEL, ENDPOINT = "sim-chat", "/v1/chat/completions"
BODY = {"model": MODEL, "messages": [{"role": "user", "content": "Say hello."}], "max_tokens": 16}
LAYERS = ("aiohttp", "aiohttp+timeout", "send", "registry", "executor")


async def _workers(count: int, requests: int, one: Callable[[int], Awaitable[None]]) -> None:
    left = iter(range(requests))

    async def worker() -> None:
        for n in left:
            await one(n)

    await asyncio.gather(*(worker() for _ in range(count)))


async def _raw(registry: UpstreamRegistry, urls: list[str], requests: int, timeout: bool) -> None:
    session = registry._client
    assert session is not None
    payload, headers = orjson.dumps(BODY), {"content-type": "application/json"}

    async def one(n: int) -> None:
        extra: dict[str, Any] = {"timeout": aiohttp.ClientTimeout(total=600.0)} if timeout else {}
        async with session.post(f"{urls[n % len(urls)]}/chat/completions", data=payload, headers=headers, **extra) as r:
            orjson.loads(await r.read())

    await _workers(URLS * PER_URL, requests, one)


async def _send(registry: UpstreamRegistry, requests: int) -> None:
    from app.engine.upstream.transport import send

    upstream, client = registry._models[MODEL], registry._client
    assert client is not None
    payload = orjson.dumps(BODY)

    async def one(n: int) -> None:
        await send(client, upstream, ENDPOINT, payload)

    await _workers(URLS * PER_URL, requests, one)


async def _registry(registry: UpstreamRegistry, requests: int) -> None:
    async def one(n: int) -> None:
        await registry.execute(ENDPOINT, BODY, f"req-{n}")

    await _workers(URLS * PER_URL, requests, one)


async def _executor(registry: UpstreamRegistry, requests: int) -> None:
    async def lines() -> AsyncIterator[InputLine]:
        for n in range(requests):
            yield InputLine(n, f"c-{n}", ENDPOINT, BODY)

    async def on_outcome(outcome: LineOutcome) -> None:
        return None

    await LineExecutor(registry, window=2 * URLS * PER_URL).run(lines(), on_outcome, asyncio.Event())


async def _measure(urls: list[str], requests: int, rounds: int, log: Callable[[str], None]) -> list[dict[str, Any]]:
    registry = UpstreamRegistry()
    spec = UpstreamSpec(name=MODEL, urls=tuple(urls), model=MODEL, max_concurrency=PER_URL)
    await registry.start([spec])
    runs = {
        "aiohttp": lambda: _raw(registry, urls, requests, timeout=False),
        "aiohttp+timeout": lambda: _raw(registry, urls, requests, timeout=True),
        "send": lambda: _send(registry, requests),
        "registry": lambda: _registry(registry, requests),
        "executor": lambda: _executor(registry, requests),
    }
    results = []
    try:
        await runs["aiohttp"]()  # warm the connection pool
        for r in range(rounds):
            for layer in rotated(LAYERS, r):
                cpu, wall = cpu_seconds(), time.perf_counter()
                await runs[layer]()
                results.append(
                    {
                        "round": r + 1,
                        "layer": layer,
                        "wall_s": round(time.perf_counter() - wall, 3),
                        "cpu_us_per_request": round(1e6 * (cpu_seconds() - cpu) / requests, 1),
                    }
                )
                log(json.dumps(results[-1]))
    finally:
        await registry.shutdown()
    return results


def _median_by_layer(runs: list[dict[str, Any]]) -> dict[str, float]:
    return {layer: statistics.median(r["cpu_us_per_request"] for r in runs if r["layer"] == layer) for layer in LAYERS}


def _median_ratio_to_aiohttp(runs: list[dict[str, Any]]) -> dict[str, float | None]:
    """Each layer's CPU over the bare aiohttp request's in the same round, median over rounds
    (this host's speed drifts between rounds)."""

    def by_round(layer: str) -> list[float | None]:
        return [r["cpu_us_per_request"] for r in sorted(runs, key=lambda r: r["round"]) if r["layer"] == layer]

    ratios = {layer: median_same_round_ratio(by_round(layer), by_round("aiohttp")) for layer in LAYERS}
    return {layer: None if value is None else round(value, 3) for layer, value in ratios.items()}


def render(report: Document) -> str:
    medians, ratios = report["median_cpu_us"], report["median_ratio_to_aiohttp"]
    rows, before = [], None
    for layer in LAYERS:
        added = "" if before is None else f"{ratios[layer] - ratios[before]:+.2f}"
        rows.append(f"| {layer} | {medians[layer]:.1f} | {ratios[layer]:.2f} | {added} |")
        before = layer
    runs = "\n".join(
        f"| {r['round']} | {r['layer']} | {r['wall_s']:.3f} | {r['cpu_us_per_request']:.1f} |" for r in report["runs"]
    )
    return f"""{report["requests"]:,} chat requests per run, {report["rounds"]} rounds,
layers interleaved and rotated; one process on CPU 0, the fake fleet ({URLS} URLs x {PER_URL}, no delay) on
CPU 1. What each layer is: the docstring of bench/workloads/w8_layers.py.

| layer | CPU µs per request (median) | x aiohttp (median of same-round ratios) | added by this layer (x aiohttp) |
|---|---|---|---|
{chr(10).join(rows)}

The executor row is batchd's whole line path apart from the database and the result files
(checkpoint chunks, validation, finalize), which W8's profile puts at about a tenth of its CPU.

## Every run

| round | layer | wall s | CPU µs per request |
|---|---|---|---|
{runs}
"""


class W8Layers:
    id, slug, title = "W8-layers", "W8-layers", "Front-end ceiling by layer: CPU per upstream request"
    default_rounds = 3
    Params: ClassVar[type[NoParams]] = NoParams

    def run(self, context: Context) -> Report:
        requests = context.scaled(REQUESTS)
        work = context.work_dir / "W8-layers"
        work.mkdir(parents=True, exist_ok=True)
        before = os.sched_getaffinity(0)
        os.sched_setaffinity(0, {1})
        try:
            fleet = FakeFleet(work, count=URLS, model=MODEL, max_concurrency=PER_URL).start()
            os.sched_setaffinity(0, {0})
            try:
                runs = uvloop.run(_measure(fleet.urls, requests, context.rounds, context.log))
            finally:
                fleet.stop()
        finally:
            os.sched_setaffinity(0, before)
        data = {
            "requests": requests,
            "rounds": context.rounds,
            "median_cpu_us": _median_by_layer(runs),
            "median_ratio_to_aiohttp": _median_ratio_to_aiohttp(runs),
            "runs": runs,
        }
        return Report(self.id, self.slug, self.title, data, render)
