"""Discovery and health: ``GET {url}/models`` says whether a URL is up and serves the model.

Each URL is probed at start, then every ``health_interval_s`` while in the rotation, and
after its cooldown while out of it, so a URL that failed comes back as soon as it answers.
"""

from __future__ import annotations

import asyncio
import logging
import time

import aiohttp
import orjson

from app.core.statuses import UpstreamState
from app.engine.upstream.targets import Target, TargetPool

log = logging.getLogger("batchd.upstream")

_PROBE_TIMEOUT = aiohttp.ClientTimeout(total=5.0)
_TICK_S = 0.25


async def probe(
    client: aiohttp.ClientSession, target: Target, model: str, headers: dict[str, str]
) -> tuple[UpstreamState, str]:
    """``(state, why)`` of one URL for ``model``."""
    try:
        async with client.get(f"{target.url}/models", headers=headers, timeout=_PROBE_TIMEOUT) as response:
            status, raw = response.status, await response.read()
    except (aiohttp.ClientError, TimeoutError) as exc:
        return UpstreamState.DOWN, repr(exc)
    if status != 200:
        return UpstreamState.DOWN, f"GET /models answered HTTP {status}"
    try:
        ids = {card.get("id") for card in orjson.loads(raw).get("data", [])}
    except (orjson.JSONDecodeError, AttributeError, TypeError):
        return UpstreamState.DOWN, "GET /models did not answer a model list"
    if model not in ids:
        return UpstreamState.NO_MODEL, f"it serves {sorted(str(i) for i in ids)}, not {model!r}"
    return UpstreamState.UP, ""


async def probe_all(client: aiohttp.ClientSession, pool: TargetPool, model: str, headers: dict[str, str]) -> None:
    """Probe every URL of ``pool`` once, side by side."""
    results = await asyncio.gather(*(probe(client, t, model, headers) for t in pool.targets))
    for target, (state, why) in zip(pool.targets, results, strict=True):
        pool.set_state(target, state, why)


async def watch(
    client: aiohttp.ClientSession,
    pool: TargetPool,
    target: Target,
    model: str,
    headers: dict[str, str],
    interval: float,
) -> None:
    """Probe ``target`` forever: every ``interval`` while up, after its cooldown while not
    (it may leave the rotation between two probes, hence the short ticks)."""
    next_probe = time.monotonic() + interval
    while True:
        await asyncio.sleep(min(_TICK_S, interval))
        now = time.monotonic()
        if now < (next_probe if target.in_rotation else target.down_until):
            continue
        try:
            state, why = await probe(client, target, model, headers)
        except Exception as exc:  # noqa: BLE001 - a probe must never end the watch
            state, why = UpstreamState.DOWN, repr(exc)
        pool.set_state(target, state, why)
        next_probe = time.monotonic() + interval
