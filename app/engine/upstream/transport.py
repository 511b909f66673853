"""One line's trip to an upstream: pick a URL, POST, classify the answer, retry what may
succeed if tried again (tenacity does the policy: exponential backoff with jitter, at least
``Retry-After``, no sleep past the line's deadline).

Retried: connection errors, timeouts, 429, 500, 502, 503, 504. Any other answer is the
line's response as the upstream gave it (status code and body), so a 400 lands in the error
file. When the deadline passes: the last answer if there was one; 504 ``request_timeout`` if
the last attempt timed out; :class:`UpstreamUnavailable` if no URL could be reached at all
(not the line's fault: the worker leaves it unrecorded and resumes later).
"""

from __future__ import annotations

import asyncio
import email.utils
import functools
import logging
import time
from dataclasses import dataclass
from typing import NamedTuple, cast

import aiohttp
import orjson
from tenacity import AsyncRetrying, RetryCallState, retry_if_exception_type, stop_before_delay, wait_exponential_jitter

from app.core.errors import error_envelope
from app.core.line_errors import LineErrorCode
from app.core.tracing import with_trace_headers
from app.engine.config.upstream import UpstreamSpec
from app.engine.errors import EngineDeadError
from app.engine.upstream.replies import MAX_REPLY_BYTES, ReplyTooLarge, read_capped
from app.engine.upstream.targets import Target, TargetPool

log = logging.getLogger("batchd.upstream")

RETRY_STATUSES = frozenset({429, 500, 502, 503, 504})
# These say the server (or the balancer in front of it) is unwell, not the line.
_UNWELL_STATUSES = frozenset({502, 503, 504})
_backoff = wait_exponential_jitter(multiplier=0.1, max=10.0, jitter=0.2)
# A Retry-After longer than this is a server asking to be left alone; the deadline still rules.
_MAX_RETRY_AFTER_S = 300.0


class UpstreamUnavailable(EngineDeadError):
    """No URL of the model could be reached before the line's deadline."""


class _Retryable(Exception):
    """An attempt that may succeed if tried again (``status`` 0: no HTTP answer)."""

    def __init__(self, kind: str, status: int = 0, body: dict | None = None, retry_after: float = 0.0) -> None:
        super().__init__(kind, status)
        self.kind, self.status, self.body, self.retry_after = kind, status, body, retry_after


@dataclass(frozen=True)
class Upstream:
    """What sending a line to one model needs."""

    spec: UpstreamSpec
    pool: TargetPool
    headers: dict[str, str]


class _Nth(NamedTuple):
    """What tenacity's wait strategies read of a retry state: the attempt that just failed."""

    attempt_number: int


def _delay(failed_attempt: int, exc: BaseException | None) -> float:
    state = cast(RetryCallState, _Nth(failed_attempt))
    return max(_backoff(state), getattr(exc, "retry_after", 0.0))


def _wait_after_first(retry_state) -> float:
    # The loop starts at the second attempt: its attempt 1 is the line's attempt 2.
    return _delay(retry_state.attempt_number + 1, retry_state.outcome.exception())


async def send(
    client: aiohttp.ClientSession,
    upstream: Upstream,
    endpoint: str,
    payload: bytes,
    without_priority: bytes | None = None,
) -> tuple[int, dict]:
    """POST ``payload`` to ``endpoint`` (canonical ``/v1/...``) of the model's upstreams;
    ``(status, body)`` as the upstream answered. Cancelling the caller closes the connection
    (vLLM then aborts the request). When ``payload`` carries a ``priority``,
    ``without_priority`` is the same line without it, for URLs that do not schedule by
    priority."""
    spec = upstream.spec
    sending = _Payloads(payload, without_priority)
    deadline = time.monotonic() + spec.line_deadline_s
    path = endpoint[len("/v1") :]
    try:
        # Most lines succeed at once: the retry loop is built only for those that do not
        # (building it for every line was 8% of an upstream replica's CPU in W5).
        try:
            return await _attempt(client, upstream, path, sending, deadline)
        except _Retryable as first:
            pause = _delay(1, first)
            if time.monotonic() + pause >= deadline:
                raise
            await asyncio.sleep(pause)
        retrying = AsyncRetrying(
            retry=retry_if_exception_type(_Retryable),
            stop=stop_before_delay(max(0.0, deadline - time.monotonic())),
            wait=_wait_after_first,
            reraise=True,
        )
        async for attempt in retrying:
            with attempt:
                return await _attempt(client, upstream, path, sending, deadline)
    except _Retryable as last:
        if last.kind == "timeout":
            return 504, error_body(
                f"The upstream did not answer within {spec.timeout_s:g} s (tried until the line's "
                f"deadline of {spec.line_deadline_s:g} s).",
                "timeout",
                LineErrorCode.REQUEST_TIMEOUT,
            )
        if last.body is not None:
            return last.status, last.body
        raise UpstreamUnavailable(
            spec.name, f"No upstream of model {spec.name!r} answered before the line's deadline ({last.kind})."
        ) from None
    raise AssertionError("unreachable")


class _Payloads(NamedTuple):
    """A line's body, and the same without ``priority`` (None when it has none)."""

    body: bytes
    without_priority: bytes | None

    def for_target(self, target: Target) -> bytes:
        if self.without_priority is not None and not target.sends_priority:
            return self.without_priority
        return self.body


def refuses_priority(status: int, raw: bytes) -> bool:
    """vLLM's answer to a non-zero ``priority`` on a server without priority scheduling:
    400 "Got priority N but Priority scheduling is not enabled." (older releases)."""
    return status == 400 and b"priority scheduling is not enabled" in raw.lower()


async def _post(
    client: aiohttp.ClientSession, url: str, data: bytes, headers: dict[str, str], timeout: aiohttp.ClientTimeout
) -> tuple[int, bytes, str | None]:
    # No redirects: a POST's body is not sent again elsewhere (a 3xx is the line's answer).
    async with client.post(url, data=data, headers=headers, timeout=timeout, allow_redirects=False) as response:
        return response.status, await read_capped(response, MAX_REPLY_BYTES), response.headers.get("Retry-After")


async def _attempt(
    client: aiohttp.ClientSession, upstream: Upstream, path: str, sending: _Payloads, deadline: float
) -> tuple[int, dict]:
    pool, spec = upstream.pool, upstream.spec
    # A free slot needs no wait; a line that waits gives the pool its deadline (one timer for
    # all: a timer per line was 3% of W8's CPU).
    target = pool.try_acquire()
    if target is None:
        try:
            target = await pool.acquire(deadline)
        except TimeoutError:
            raise _Retryable("no upstream in rotation") from None
    try:
        left = deadline - time.monotonic()
        if left >= spec.timeout_s:
            timeout = _full_timeout(max(0.001, spec.timeout_s))
        else:
            timeout = aiohttp.ClientTimeout(total=max(0.001, left))
        data = sending.for_target(target)
        headers = with_trace_headers(upstream.headers)
        status, raw, retry_after = await _post(client, target.url + path, data, headers, timeout)
        if sending.without_priority is not None and data is sending.body and refuses_priority(status, raw):
            # Not the line's fault: the same URL, at once, without the field.
            target.refuses_priority(spec.name)
            status, raw, retry_after = await _post(
                client, target.url + path, sending.without_priority, headers, timeout
            )
    except (TimeoutError, aiohttp.ServerTimeoutError) as exc:
        pool.overloaded(target)
        if isinstance(exc, aiohttp.ConnectionTimeoutError):
            pool.failed(target, repr(exc))
        raise _Retryable("timeout") from None
    except aiohttp.ClientError as exc:
        pool.failed(target, repr(exc))
        raise _Retryable("connection error") from None
    except ReplyTooLarge as exc:
        # The line's own answer (the same line would get it again): not retried, the URL is well.
        return 502, error_body(
            f"The upstream's answer was too large ({exc}); batchd reads at most {exc.limit} bytes of one.",
            "upstream_error",
            None,
        )
    finally:
        pool.release(target)
    body = _json_body(status, raw)
    if status in RETRY_STATUSES:
        if status == 429:
            pool.overloaded(target)
        elif status in _UNWELL_STATUSES:
            pool.failed(target, f"HTTP {status}")
        log.debug("upstream %s answered %d; retrying", target.url, status)
        raise _Retryable("status", status, body, _retry_after(retry_after))
    pool.succeeded(target)
    return status, body


@functools.lru_cache(maxsize=64)
def _full_timeout(total: float) -> aiohttp.ClientTimeout:
    """A model's configured timeout: one object for every attempt with that much of its line's
    deadline left, not one per request."""
    return aiohttp.ClientTimeout(total=total)


def _json_body(status: int, raw: bytes) -> dict:
    """The upstream's JSON object as is; anything else (an HTML page from a balancer) wrapped
    in OpenAI's error envelope so the line still gets a body."""
    try:
        body = orjson.loads(raw)
    except orjson.JSONDecodeError:
        body = None
    if isinstance(body, dict):
        return body
    text = raw[:2000].decode("utf-8", "replace")
    return error_body(
        f"The upstream answered HTTP {status} with a body that is not a JSON object: {text}", "upstream_error", None
    )


def error_body(message: str, err_type: str, code: str | None) -> dict:
    return error_envelope(message, err_type, code=code)


def _retry_after(value: str | None) -> float:
    """``Retry-After`` in seconds (delta-seconds or an HTTP date); 0 when absent or unreadable."""
    if not value:
        return 0.0
    try:
        seconds = float(value)
    except ValueError:
        try:
            seconds = email.utils.parsedate_to_datetime(value).timestamp() - time.time()
        except (TypeError, ValueError):
            return 0.0
    return min(max(seconds, 0.0), _MAX_RETRY_AFTER_S)
