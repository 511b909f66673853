"""Discovery and health: ``GET {url}/models`` says whether a URL is up and serves the model,
and which LoRA adapters it serves on it: the cards whose ``parent`` is the model, as ``vllm
serve --enable-lora --lora-modules NAME=PATH`` lists them (``{"id": NAME, "parent": MODEL}``),
at most ``MAX_ADAPTERS`` of them (the first by id), from an answer of at most
``MAX_MODELS_BYTES`` (:mod:`.replies`).

Each URL is probed at start, then every ``health_interval_s`` while in the rotation, and
after its cooldown while out of it, so a URL that failed comes back as soon as it answers.
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Callable
from typing import Any, NamedTuple

import aiohttp
import orjson

from app.core.statuses import UpstreamState
from app.engine.upstream.replies import MAX_ADAPTERS, MAX_MODELS_BYTES, ReplyTooLarge, read_capped
from app.engine.upstream.targets import Target, TargetPool

log = logging.getLogger("batchd.upstream")

_PROBE_TIMEOUT = aiohttp.ClientTimeout(total=5.0)
_TICK_S = 0.25


class Probe(NamedTuple):
    """One URL's verdict for a model, and the ids of the LoRA adapters it lists on the model."""

    state: UpstreamState
    why: str = ""
    adapters: frozenset[str] = frozenset()


async def probe(client: aiohttp.ClientSession, target: Target, model: str, headers: dict[str, str]) -> Probe:
    """What ``GET {url}/models`` says of ``model`` (see :func:`read_models`)."""
    try:
        async with client.get(f"{target.url}/models", headers=headers, timeout=_PROBE_TIMEOUT) as response:
            status, raw = response.status, await read_capped(response, MAX_MODELS_BYTES)
    except (aiohttp.ClientError, TimeoutError) as exc:
        return Probe(UpstreamState.DOWN, repr(exc))
    except ReplyTooLarge as exc:
        return Probe(UpstreamState.DOWN, f"GET /models answered {exc}")
    if status != 200:
        return Probe(UpstreamState.DOWN, f"GET /models answered HTTP {status}")
    return read_models(raw, model)


def read_models(raw: bytes, model: str) -> Probe:
    """A ``GET /models`` answer: ``up`` with the ids of ``model``'s adapters when it lists
    ``model``, ``no_model`` when it lists others, ``down`` when it is no model list."""
    try:
        cards: list[Any] = orjson.loads(raw).get("data", [])
        ids = {card.get("id") for card in cards}
    except (orjson.JSONDecodeError, AttributeError, TypeError):
        return Probe(UpstreamState.DOWN, "GET /models did not answer a model list")
    if model not in ids:
        return Probe(UpstreamState.NO_MODEL, f"it serves {sorted(str(i) for i in ids)}, not {model!r}")
    listed = {card.get("id") for card in cards if card.get("parent") == model}
    adapters = sorted(a for a in listed if isinstance(a, str) and a and a != model)
    if len(adapters) > MAX_ADAPTERS:
        log.warning(
            "an upstream of %s lists %d LoRA adapters; serving the first %d", model, len(adapters), MAX_ADAPTERS
        )
    return Probe(UpstreamState.UP, "", frozenset(adapters[:MAX_ADAPTERS]))


def apply(pool: TargetPool, target: Target, found: Probe) -> None:
    """Record a probe's verdict on ``target`` (its adapters first: the pool may wake lines)."""
    target.adapters = found.adapters
    pool.set_state(target, found.state, found.why)


async def probe_all(client: aiohttp.ClientSession, pool: TargetPool, model: str, headers: dict[str, str]) -> None:
    """Probe every URL of ``pool`` once, side by side."""
    results = await asyncio.gather(*(probe(client, t, model, headers) for t in pool.targets))
    for target, found in zip(pool.targets, results, strict=True):
        apply(pool, target, found)


async def watch(
    client: aiohttp.ClientSession,
    pool: TargetPool,
    target: Target,
    model: str,
    headers: dict[str, str],
    interval: float,
    probed: Callable[[], None] | None = None,
) -> None:
    """Probe ``target`` forever: every ``interval`` while up, after its cooldown while not
    (it may leave the rotation between two probes, hence the short ticks); ``probed`` is
    called after each verdict is recorded."""
    next_probe = time.monotonic() + interval
    while True:
        await asyncio.sleep(min(_TICK_S, interval))
        now = time.monotonic()
        if now < (next_probe if target.in_rotation else target.down_until):
            continue
        try:
            found = await probe(client, target, model, headers)
        except Exception as exc:  # noqa: BLE001 - a probe must never end the watch
            found = Probe(UpstreamState.DOWN, repr(exc))
        apply(pool, target, found)
        if probed is not None:
            try:
                probed()
            except Exception:  # a listener's bug must not end the watch either
                log.exception("after probing %s", target.url)
        next_probe = time.monotonic() + interval
