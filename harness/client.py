"""The one way the tests and the benchmarks make an `openai` client for a batchd server."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

import openai

if TYPE_CHECKING:
    import anthropic


def openai_client(
    base_url: str, api_key: str, *, max_retries: int = 0, timeout: float | None = None, **options: Any
) -> openai.OpenAI:
    """A client of `base_url`. No retries unless asked: a test sees every status the server
    sends, and a retried 5xx would hide one. `options` go to `openai.OpenAI` as they are."""
    if timeout is not None:
        options["timeout"] = timeout
    return openai.OpenAI(base_url=base_url, api_key=api_key, max_retries=max_retries, **options)


def async_openai_client(
    base_url: str, api_key: str, *, max_retries: int = 0, timeout: float | None = None, **options: Any
) -> openai.AsyncOpenAI:
    """The asyncio twin of `openai_client`."""
    if timeout is not None:
        options["timeout"] = timeout
    return openai.AsyncOpenAI(base_url=base_url, api_key=api_key, max_retries=max_retries, **options)


def anthropic_client(base_url: str, api_key: str, *, max_retries: int = 0, **options: Any) -> anthropic.Anthropic:
    """An `anthropic` client of the server whose OpenAI `base_url` (ending in `/v1`) is given:
    Anthropic's client adds `/v1` itself. Imported here: a second of CPU in every test process
    that never uses it."""
    import anthropic

    return anthropic.Anthropic(
        base_url=base_url.removesuffix("/v1"), api_key=api_key, max_retries=max_retries, **options
    )
