"""Failed key checks, throttled twice: per client address and per the presented key's prefix,
each a token bucket of `burst` failures that refills over `window_seconds`.

Only failures are throttled: the key is always checked first, and a key that verifies is served
whatever its address or prefix has done (behind an ingress every tenant arrives from the
controller's address, so a stranger's garbage must not lock out a good key). A bad key is
refused 429 instead of 401 while its address or its prefix has no failure left. The prefix
bucket is what throttles one client's typo'd key when all clients share an address; a
neighbour's key has another prefix, so it is not counted against it."""

from __future__ import annotations

import math
import time
from collections.abc import Callable

# Entries remembered at once, per bucket kind: the least recently failing is forgotten first, so
# a flood from many addresses (or of many made-up prefixes) costs bounded memory.
MAX_ENTRIES = 10_000
# How much of a key names its bucket: a stored key's `bd-` and five random characters (the
# prefix `batchd keys list` shows), so a typo further on still counts against its own key.
PREFIX_CHARS = 8


class FailureBuckets:
    """A token bucket of failures for each of many names (addresses, or key prefixes)."""

    def __init__(self, burst: int, window_seconds: float, clock: Callable[[], float]) -> None:
        self.burst = burst
        self.rate = burst / window_seconds  # failures regained per second
        self.clock = clock
        # name -> (failures left, when counted); only names that used some.
        self._buckets: dict[str, tuple[float, float]] = {}

    def _left(self, name: str) -> float:
        entry = self._buckets.get(name)
        if entry is None:
            return float(self.burst)
        left, since = entry
        return min(float(self.burst), left + (self.clock() - since) * self.rate)

    def retry_after(self, name: str) -> int | None:
        """Seconds until `name` has a failure left; None when it has one now."""
        left = self._left(name)
        if left >= 1:
            return None
        return max(1, math.ceil((1 - left) / self.rate))

    def failed(self, name: str) -> None:
        left = self._left(name) - 1
        self._buckets.pop(name, None)  # re-inserted last: the most recent
        self._buckets[name] = (left, self.clock())
        if len(self._buckets) > MAX_ENTRIES:
            del self._buckets[next(iter(self._buckets))]


class FailedAuthThrottle:
    def __init__(self, burst: int, window_seconds: float, clock: Callable[[], float] = time.monotonic) -> None:
        self.by_address = FailureBuckets(burst, window_seconds, clock)
        self.by_prefix = FailureBuckets(burst, window_seconds, clock)

    def refused(self, address: str, key: str) -> tuple[str, int] | None:
        """Account for a key from `address` that failed the check: None when it is still within
        both allowances (the failure is counted: a 401), else which allowance is spent and the
        seconds until it has room again (a 429; not counted, so a refill is not eaten up)."""
        prefix = key[:PREFIX_CHARS]
        for what, buckets, name in (("address", self.by_address, address), ("key", self.by_prefix, prefix)):
            retry_after = buckets.retry_after(name)
            if retry_after is not None:
                return what, retry_after
        self.by_address.failed(address)
        self.by_prefix.failed(prefix)
        return None
