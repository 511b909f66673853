"""What a worker needs, built once per process."""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path

from app.core.config import Settings
from app.db.engine import Database
from app.engine.protocol import Engines
from app.pipeline.fair_gate import FairGate
from app.storage.base import BlobStore
from app.worker.schedule import Schedule


@dataclass
class WorkerContext:
    db: Database
    store: BlobStore
    registry: Engines
    settings: Settings
    gates: dict[str, FairGate] = field(default_factory=dict)
    schedule: Schedule = field(init=False)

    def __post_init__(self) -> None:
        self.schedule = Schedule(self.db, self.settings.replica_id)

    def gate(self, model: str) -> FairGate:
        """One admission gate per model, shared by every project using that model."""
        if model not in self.gates:
            self.gates[model] = FairGate(self.window(model), name=model, policy=self.schedule)
        return self.gates[model]

    def window(self, model: str) -> int:
        if not self.registry.endpoints_for(model):
            return 1  # a Message Batch none of whose lines names a served model: each fails alone
        return self.registry.suggested_concurrency(model)

    @property
    def owner(self) -> str:
        """Who holds the leases this worker takes: the replica id."""
        return self.settings.replica_id

    @property
    def data_dir(self) -> Path:
        return self.settings.data_dir
