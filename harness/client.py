"""The one way the tests and the benchmarks make an `openai` client for a batchd server."""

from __future__ import annotations

import contextlib
import functools
import ssl
from typing import TYPE_CHECKING, Any

import httpx
import openai

if TYPE_CHECKING:
    import anthropic


@functools.cache
def tls_context() -> ssl.SSLContext:
    """One TLS context for every client made here: an httpx client made without one loads the CA
    bundle again (about 30 ms of CPU), which a suite making a client per test and per poll paid
    thousands of times over."""
    return httpx.create_ssl_context()


class _HttpClient(openai.DefaultHttpxClient):
    """openai's default HTTP client on the shared context, closed when dropped as openai's own is."""

    def __init__(self, **options: Any) -> None:
        super().__init__(verify=tls_context(), **options)

    def __del__(self) -> None:
        with contextlib.suppress(Exception):  # at interpreter exit, as openai's own
            self.close()


def openai_client(
    base_url: str, api_key: str, *, max_retries: int = 0, timeout: float | None = None, **options: Any
) -> openai.OpenAI:
    """A client of `base_url`. No retries unless asked: a test sees every status the server
    sends, and a retried 5xx would hide one. `options` go to `openai.OpenAI` as they are."""
    if timeout is not None:
        options["timeout"] = timeout
    options.setdefault("http_client", _HttpClient())
    return openai.OpenAI(base_url=base_url, api_key=api_key, max_retries=max_retries, **options)


def async_openai_client(
    base_url: str, api_key: str, *, max_retries: int = 0, timeout: float | None = None, **options: Any
) -> openai.AsyncOpenAI:
    """The asyncio twin of `openai_client`."""
    if timeout is not None:
        options["timeout"] = timeout
    options.setdefault("http_client", openai.DefaultAsyncHttpxClient(verify=tls_context()))
    return openai.AsyncOpenAI(base_url=base_url, api_key=api_key, max_retries=max_retries, **options)


def anthropic_client(base_url: str, api_key: str, *, max_retries: int = 0, **options: Any) -> anthropic.Anthropic:
    """An `anthropic` client of the server whose OpenAI `base_url` (ending in `/v1`) is given:
    Anthropic's client adds `/v1` itself. Imported here: a second of CPU in every test process
    that never uses it."""
    import anthropic

    options.setdefault("http_client", anthropic.DefaultHttpxClient(verify=tls_context()))
    return anthropic.Anthropic(
        base_url=base_url.removesuffix("/v1"), api_key=api_key, max_retries=max_retries, **options
    )
