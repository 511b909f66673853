"""Prompt tokens of batch lines from an upstream's `/tokenize` (vLLM's server has it, beside
`/v1`), for the enqueued-token limit at validation. An upstream without one (or unreachable)
gets None, and the caller estimates (app/engine/prompt_tokens.py)."""

from __future__ import annotations

import asyncio
from collections.abc import Sequence
from typing import Any

import aiohttp

from app.core.endpoints import CHAT_COMPLETIONS
from app.engine.prompt_tokens import prompt_parts
from app.engine.upstream.transport import Upstream

# Requests to /tokenize in flight at once for one chunk of lines.
_CONCURRENCY = 16
_TIMEOUT = aiohttp.ClientTimeout(total=30)


class NoTokenize(Exception):
    """The upstream answered /tokenize with anything but a count."""


def _tokenize_url(upstream: Upstream) -> str | None:
    for target in upstream.pool.targets:
        if target.in_rotation:
            return target.url.removesuffix("/").removesuffix("/v1") + "/tokenize"
    return None


def _request(upstream: Upstream, endpoint: str, body: Any) -> dict[str, Any]:
    model = upstream.spec.upstream_model
    if endpoint == CHAT_COMPLETIONS and isinstance(body, dict) and isinstance(body.get("messages"), list):
        return {"model": model, "messages": body["messages"], "add_generation_prompt": True}
    texts, _ = prompt_parts(endpoint, body)
    return {"model": model, "prompt": "\n".join(texts)}


async def tokenize_counts(
    client: aiohttp.ClientSession, upstream: Upstream, endpoint: str, bodies: Sequence[Any]
) -> list[int] | None:
    """Each body's prompt tokens as the upstream counts them, or None when it cannot."""
    url = _tokenize_url(upstream)
    if url is None:
        return None
    gate = asyncio.Semaphore(_CONCURRENCY)

    async def count(body: Any) -> int:
        _, ids = prompt_parts(endpoint, body)
        async with (
            gate,
            client.post(
                url, json=_request(upstream, endpoint, body), headers=upstream.headers, timeout=_TIMEOUT
            ) as response,
        ):
            if response.status != 200:
                raise NoTokenize(response.status)
            answer = await response.json(content_type=None)
        if not isinstance(answer, dict) or not isinstance(answer.get("count"), int):
            raise NoTokenize("no count")
        return ids + answer["count"]

    try:
        return list(await asyncio.gather(*(count(body) for body in bodies)))
    except (NoTokenize, aiohttp.ClientError, TimeoutError, ValueError):
        return None
