"""Prompt tokens of batch lines from an upstream's `/tokenize` (vLLM's server has it, beside
`/v1`), for the enqueued-token limit at validation.

A line whose `/tokenize` fails (a 5xx or 429, no connection, a timeout, an answer without a
count) is asked again with backoff; if it still fails, that line alone is estimated
(app/engine/prompt_tokens.py), and the next chunk asks again. An upstream that has no
`/tokenize` (404, 405, 501) makes the whole call None: the caller estimates and stops asking
for a while."""

from __future__ import annotations

import asyncio
from collections.abc import Sequence
from typing import Any

import aiohttp
import orjson
from tenacity import AsyncRetrying, retry_if_exception_type, stop_after_attempt, wait_exponential

from app.core.endpoints import CHAT_COMPLETIONS, MESSAGES
from app.engine.prompt_tokens import estimate, prompt_parts
from app.engine.upstream.replies import MAX_TOKENIZE_BYTES, ReplyTooLarge, read_capped
from app.engine.upstream.transport import Upstream

# Requests to /tokenize in flight at once for one chunk of lines.
_CONCURRENCY = 16
_TIMEOUT = aiohttp.ClientTimeout(total=30)
# Tries of one line's /tokenize, and the first wait between them (doubling, at most _MAX_WAIT_S).
ATTEMPTS = 3
_FIRST_WAIT_S = 0.2
_MAX_WAIT_S = 2.0
# Statuses that say the upstream has no /tokenize at all (asking again per line is pointless).
_ABSENT = frozenset({404, 405, 501})


class TokenizeFailed(Exception):
    """This /tokenize request did not give a count (may succeed if asked again)."""


class NoTokenize(Exception):
    """The upstream has no /tokenize."""


def _tokenize_url(upstream: Upstream) -> str | None:
    for target in upstream.pool.targets:
        if target.in_rotation:
            return target.url.removesuffix("/").removesuffix("/v1") + "/tokenize"
    return None


def _request(upstream: Upstream, endpoint: str, body: Any) -> dict[str, Any]:
    model = upstream.spec.upstream_model
    if endpoint in (CHAT_COMPLETIONS, MESSAGES) and isinstance(body, dict) and isinstance(body.get("messages"), list):
        messages = body["messages"]
        if endpoint == MESSAGES and body.get("system"):  # Anthropic's system prompt, as a chat message
            messages = [{"role": "system", "content": body["system"]}, *messages]
        return {"model": model, "messages": messages, "add_generation_prompt": True}
    texts, _ = prompt_parts(endpoint, body)
    return {"model": model, "prompt": "\n".join(texts)}


async def tokenize_counts(
    client: aiohttp.ClientSession, upstream: Upstream, endpoint: str, bodies: Sequence[Any]
) -> list[int] | None:
    """Each body's prompt tokens as the upstream counts them (estimated for a line it could not
    count after ATTEMPTS tries), or None when the upstream has no /tokenize."""
    url = _tokenize_url(upstream)
    if url is None:
        return None
    gate = asyncio.Semaphore(_CONCURRENCY)
    # Once a line has failed every try, the rest of the chunk is estimated without asking: a
    # fleet that is down costs one line's retries per chunk, not every line's.
    gave_up = asyncio.Event()

    async def once(body: Any) -> int:
        _, ids = prompt_parts(endpoint, body)
        try:
            async with client.post(
                url,
                json=_request(upstream, endpoint, body),
                headers=upstream.headers,
                timeout=_TIMEOUT,
                allow_redirects=False,
            ) as response:
                if response.status in _ABSENT:
                    raise NoTokenize(response.status)
                if response.status != 200:
                    raise TokenizeFailed(response.status)
                answer = orjson.loads(await read_capped(response, MAX_TOKENIZE_BYTES))
        except (aiohttp.ClientError, TimeoutError, ValueError, ReplyTooLarge) as error:
            raise TokenizeFailed(repr(error)) from error
        if not isinstance(answer, dict) or not isinstance(answer.get("count"), int):
            raise TokenizeFailed("no count")
        return ids + answer["count"]

    async def count(body: Any) -> int:
        async with gate:
            if gave_up.is_set():
                return estimate(endpoint, body)
            try:
                async for attempt in AsyncRetrying(
                    retry=retry_if_exception_type(TokenizeFailed),
                    stop=stop_after_attempt(ATTEMPTS),
                    wait=wait_exponential(multiplier=_FIRST_WAIT_S, max=_MAX_WAIT_S),
                    reraise=True,
                ):
                    with attempt:
                        return await once(body)
            except TokenizeFailed:
                gave_up.set()
                return estimate(endpoint, body)
            raise AssertionError("unreachable")

    try:
        return list(await asyncio.gather(*(count(body) for body in bodies)))
    except NoTokenize:
        return None
