"""Failed key checks, throttled per client address: a token bucket of `burst` failures that
refills over `window_seconds`. An address with no failure left is refused before its key is
looked at (no database read), until the bucket has refilled by one."""

from __future__ import annotations

import math
import time
from collections.abc import Callable

# Addresses remembered at once: the least recently failing is forgotten first, so a flood from
# many addresses costs bounded memory.
MAX_ADDRESSES = 10_000


class FailedAuthThrottle:
    def __init__(self, burst: int, window_seconds: float, clock: Callable[[], float] = time.monotonic) -> None:
        self.burst = burst
        self.rate = burst / window_seconds  # failures regained per second
        self.clock = clock
        # address -> (failures left, when counted); only addresses that used some.
        self._buckets: dict[str, tuple[float, float]] = {}

    def _left(self, address: str) -> float:
        entry = self._buckets.get(address)
        if entry is None:
            return float(self.burst)
        left, since = entry
        return min(float(self.burst), left + (self.clock() - since) * self.rate)

    def retry_after(self, address: str) -> int | None:
        """Seconds until `address` may try a key again; None when it may now."""
        left = self._left(address)
        if left >= 1:
            return None
        return max(1, math.ceil((1 - left) / self.rate))

    def failed(self, address: str) -> None:
        left = self._left(address) - 1
        self._buckets.pop(address, None)  # re-inserted last: the most recent
        self._buckets[address] = (left, self.clock())
        if len(self._buckets) > MAX_ADDRESSES:
            del self._buckets[next(iter(self._buckets))]
