"""Caps on a costly route's requests in flight on this replica: so many per project, so many in all.

A request past either cap is answered at once, 429 with Retry-After, rather than queued: a queue
would hold its body and its connection, the very cost the cap bounds. The counts live in this
process (each replica caps its own share); the event loop is the only thread that touches them,
so they need no lock. 0 for a cap means none."""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field

from app.core.config import Settings
from app.core.errors import TooManyRequests


@dataclass
class ConcurrencyCap:
    """One route's caps: `per_project` requests of one project, `replica` of all projects."""

    what: str  # the requests it counts, as the refusal names them: "batch estimates"
    per_project: int
    replica: int
    retry_after: int
    setting: str  # the settings' stem, BATCHD_<SETTING>[_PER_PROJECT], named in the refusal
    _by_project: Counter[str] = field(default_factory=Counter, repr=False)
    _total: int = 0

    def in_flight(self, project: str | None = None) -> int:
        return self._total if project is None else self._by_project[project]

    def acquire(self, project: str) -> None:
        """Take a slot for `project`, or raise the 429 that says which cap is full."""
        if self.per_project and self._by_project[project] >= self.per_project:
            raise self._refusal(f"project '{project}' has {self.per_project}", f"{self.setting}_PER_PROJECT")
        if self.replica and self._total >= self.replica:
            raise self._refusal(f"this server has {self.replica}", self.setting)
        self._by_project[project] += 1
        self._total += 1

    def release(self, project: str) -> None:
        self._total -= 1
        self._by_project[project] -= 1
        if not self._by_project[project]:
            del self._by_project[project]

    @contextmanager
    def slot(self, project: str) -> Iterator[None]:
        """A slot held for the block."""
        self.acquire(project)
        try:
            yield
        finally:
            self.release(project)

    def _refusal(self, who: str, setting: str) -> TooManyRequests:
        return TooManyRequests(
            f"Too many {self.what} at once: {who} in progress (BATCHD_{setting}). "
            f"Retry in {self.retry_after} s, once one has finished.",
            retry_after=self.retry_after,
        )


@dataclass
class CostlyRouteCaps:
    """The caps of this replica's costly routes."""

    estimate: ConcurrencyCap
    message_batch_create: ConcurrencyCap
    flex_wait: ConcurrencyCap
    background_response_create: ConcurrencyCap

    @classmethod
    def from_settings(cls, settings: Settings) -> CostlyRouteCaps:
        s = settings
        return cls(
            estimate=ConcurrencyCap(
                "batch estimates",
                s.estimate_max_concurrent_per_project,
                s.estimate_max_concurrent,
                retry_after=5,
                setting="ESTIMATE_MAX_CONCURRENT",
            ),
            message_batch_create=ConcurrencyCap(
                "Message Batch creates",
                s.message_batch_create_max_concurrent_per_project,
                s.message_batch_create_max_concurrent,
                retry_after=10,
                setting="MESSAGE_BATCH_CREATE_MAX_CONCURRENT",
            ),
            flex_wait=ConcurrencyCap(
                "flex requests waiting",
                s.flex_max_waiting_per_project,
                s.flex_max_waiting,
                retry_after=max(1, round(s.flex_wait_seconds / 10)),
                setting="FLEX_MAX_WAITING",
            ),
            background_response_create=ConcurrencyCap(
                "background response creates",
                s.background_response_create_max_concurrent_per_project,
                s.background_response_create_max_concurrent,
                retry_after=1,
                setting="BACKGROUND_RESPONSE_CREATE_MAX_CONCURRENT",
            ),
        )
