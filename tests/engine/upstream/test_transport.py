"""How long a line waits before its next attempt: `Retry-After` (delta-seconds or an HTTP
date) against the backoff, with the clock frozen so each wait is exact."""

from __future__ import annotations

from datetime import UTC, datetime

import pytest

from app.engine.upstream import transport
from app.engine.upstream.transport import _delay, _retry_after, _Retryable

# The `Date` of RFC 9110's own examples; every HTTP date below is read against it.
NOW = datetime(2015, 10, 21, 7, 28, 0, tzinfo=UTC).timestamp()


@pytest.fixture(autouse=True)
def frozen_clock(monkeypatch):
    monkeypatch.setattr(transport.time, "time", lambda: NOW)


@pytest.mark.parametrize(
    ("header", "wait"),
    [
        ("2", 2.0),
        ("120", 120.0),
        ("0", 0.0),
        ("-5", 0.0),  # never a negative wait
        ("86400", 300.0),  # a server asking for a day gets the cap; the line's deadline still rules
    ],
)
def test_delta_seconds(header, wait):
    assert _retry_after(header) == wait


@pytest.mark.parametrize(
    ("header", "wait"),
    [
        ("Wed, 21 Oct 2015 07:28:30 GMT", 30.0),
        ("Wed, 21 Oct 2015 07:32:00 GMT", 240.0),
        ("Wed, 21 Oct 2015 08:28:00 GMT", 300.0),  # an hour ahead: capped
        ("Wed, 21 Oct 2015 07:28:00 GMT", 0.0),  # now
        ("Wed, 21 Oct 2015 07:27:00 GMT", 0.0),  # a minute ago
    ],
)
def test_http_dates(header, wait):
    assert _retry_after(header) == wait


@pytest.mark.parametrize("header", [None, "", "soon", "Wed, 32 Foo 2015 99:00:00 GMT"])
def test_absent_or_unreadable_is_no_wait(header):
    assert _retry_after(header) == 0.0


def test_retry_after_longer_than_the_backoff_sets_the_wait():
    asked = _Retryable("status", 429, None, _retry_after("Wed, 21 Oct 2015 07:28:30 GMT"))
    assert _delay(1, asked) == 30.0
    # Without one (or a shorter one), the first retry waits the backoff: 0.1 s plus up to 0.2 s of jitter.
    for exc in (_Retryable("status", 503), _Retryable("status", 429, None, _retry_after("0")), None):
        assert 0.1 <= _delay(1, exc) <= 0.3
