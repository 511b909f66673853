"""Retries with exponential backoff for the HTTP legs of run-batch (tenacity does the policy)."""

from __future__ import annotations

import logging
from collections.abc import Awaitable, Callable
from typing import TypeVar

import httpx
from tenacity import AsyncRetrying, before_sleep_log, retry_if_exception, stop_after_attempt, wait_exponential

log = logging.getLogger("batchd.run_batch")
T = TypeVar("T")

ATTEMPTS = 6


def _retryable(exc: BaseException) -> bool:
    if isinstance(exc, httpx.HTTPStatusError):
        status = exc.response.status_code
        return status >= 500 or status in (408, 429)
    return isinstance(exc, httpx.TransportError)


async def http_retry(call: Callable[[], Awaitable[T]], *, max_wait: float = 30.0) -> T:
    async for attempt in AsyncRetrying(
        retry=retry_if_exception(_retryable),
        stop=stop_after_attempt(ATTEMPTS),
        wait=wait_exponential(multiplier=0.5, max=max_wait),
        before_sleep=before_sleep_log(log, logging.WARNING),
        reraise=True,
    ):
        with attempt:
            return await call()
    raise AssertionError("unreachable")
