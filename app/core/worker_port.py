"""What the API may ask of this replica's worker, as plain data: the queue as the scheduler sees
it, an engine gate's load, and a wake-up. The worker (app/worker/runner.py) implements it; the
API and services type against this protocol, so they never reach into the worker's insides."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Protocol


@dataclass(frozen=True, slots=True)
class GateLoad:
    """One model's admission gate: lines running in its engine, lines waiting for a slot, and
    how many may run at once."""

    in_flight: int
    waiting: int
    capacity: int


@dataclass(frozen=True, slots=True)
class QueueSnapshot:
    """What this replica's scheduler works with now: recent line rates and weights per project,
    the batches projected to miss their deadline, each model's gate load, and the rate a model
    serving nothing now is projected at (its last served rate, or a prior)."""

    rates: Mapping[str, float] = field(default_factory=dict)
    at_risk: frozenset[str] = frozenset()
    weights: Mapping[str, float] = field(default_factory=dict)
    gates: Mapping[str, GateLoad] = field(default_factory=dict)
    served: Mapping[str | None, float] = field(default_factory=dict)


class WorkerPort(Protocol):
    def queue_snapshot(self) -> QueueSnapshot:
        """The scheduler's view of the queue (GET /v1/queue)."""
        ...

    def gate_load(self, model: str) -> GateLoad | None:
        """`model`'s gate load; None before the worker has run a line of it."""
        ...

    def wake(self, batch_id: str | None = None) -> None:
        """Look for work now (a batch was created or cancelled through this replica)."""
        ...
