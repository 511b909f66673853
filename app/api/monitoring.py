"""What the `/metrics` scrape reads from the database: the batch counts by status, kept for
`metrics_cache_seconds`. The count is a GROUP BY over every batch, so a scraper set to scrape
every second (or several Prometheus servers, or someone hammering an open `/metrics`) would
otherwise put one on the database each time: at most one runs per interval, however often and
however concurrently the route is called."""

from __future__ import annotations

import asyncio
import time
from collections.abc import Callable

from app.core.statuses import BatchStatus
from app.db.engine import Database
from app.db.repositories.stats import StatsRepository


class BatchCounts:
    """One process's cached batch counts; `clock` is monotonic seconds (a test's own clock)."""

    def __init__(self, clock: Callable[[], float] = time.monotonic) -> None:
        self.clock = clock
        self._counts: dict[BatchStatus, int] | None = None
        self._read_at = 0.0
        # Concurrent scrapes of stale counts wait for the one read, rather than each running it.
        self._lock = asyncio.Lock()

    def _fresh(self, max_age: float) -> dict[BatchStatus, int] | None:
        if self._counts is not None and self.clock() - self._read_at < max_age:
            return self._counts
        return None

    async def get(self, db: Database, max_age: float) -> dict[BatchStatus, int]:
        """The counts, read now if those held are `max_age` seconds old or more (0: every call)."""
        counts = self._fresh(max_age)
        if counts is not None:
            return counts
        async with self._lock:
            counts = self._fresh(max_age)
            if counts is None:
                async with db.read() as session:
                    counts = await StatsRepository(session).batches_by_status()
                self._counts, self._read_at = counts, self.clock()
        return counts
