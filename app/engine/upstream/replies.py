"""How much of an upstream's reply batchd reads: a line's answer, a probe's model list and a
`/tokenize` count each have a cap, and a reply past it is stopped there, never held whole. The
pooled client asks for replies as they are (``Accept-Encoding: identity``) and never inflates
one (a few KiB of gzip could otherwise become gigabytes in memory); a reply compressed anyway
reads as a body that is not JSON. Redirects are not followed: a POST answered with a 3xx is that
line's answer."""

from __future__ import annotations

import aiohttp

# A line's answer (an embeddings line of 2,048 inputs of 1,536 floats is about 40 MiB of JSON).
MAX_REPLY_BYTES = 64 * 1024 * 1024
# `GET /models` (a probe) and `POST /tokenize` (a count): small answers.
MAX_MODELS_BYTES = 4 * 1024 * 1024
MAX_TOKENIZE_BYTES = 1024 * 1024
# The LoRA adapters one URL may list on a model: past this the first (by id) are served.
MAX_ADAPTERS = 256


class ReplyTooLarge(Exception):
    """The reply is longer than the cap."""

    def __init__(self, limit: int) -> None:
        super().__init__(f"more than {limit} bytes")
        self.limit = limit


async def read_capped(response: aiohttp.ClientResponse, limit: int) -> bytes:
    """The reply's body, or ReplyTooLarge as soon as it passes ``limit`` bytes."""
    declared = response.content_length
    if declared is not None and declared > limit:
        raise ReplyTooLarge(limit)
    chunks: list[bytes] = []
    size = 0
    async for chunk in response.content.iter_any():
        size += len(chunk)
        if size > limit:
            raise ReplyTooLarge(limit)
        chunks.append(chunk)
    return b"".join(chunks)
