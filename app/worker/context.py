"""What a worker needs, built once per process."""

from __future__ import annotations

from dataclasses import dataclass, field
from functools import cached_property
from pathlib import Path

from app.core.config import Settings
from app.db.engine import Database
from app.domains.organization.auth import load_secret
from app.engine.protocol import Engines
from app.pipeline.cache_salt import project_salt, salt_key
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
        self.schedule = Schedule(
            self.db,
            self.settings.replica_id,
            self.settings.at_risk_max_share,
            # Upstream models: every replica sends their lines to one fleet.
            shared=lambda model: model in self.registry.status(),
            unknown_rate_wait=self.settings.at_risk_unknown_rate_wait,
        )

    def gate(self, model: str) -> FairGate:
        """One admission gate per model, shared by every project using that model."""
        if model not in self.gates:
            self.gates[model] = FairGate(self.window(model), name=model, policy=self.schedule)
        return self.gates[model]

    def line_gate(self, model: str | None, batch_model: str) -> FairGate:
        """The gate of the model a line names (a Message Batch's lines may name several); a
        model no engine serves (the line fails at once) shares its batch's gate."""
        if model == batch_model:  # the usual line: its batch's gate whether served or not
            return self.gate(batch_model)
        served = model is not None and bool(self.registry.endpoints_for(model))
        return self.gate(model if served and model is not None else batch_model)

    def window(self, model: str) -> int:
        if not self.registry.endpoints_for(model):
            return 1  # a Message Batch none of whose lines names a served model: each fails alone
        return self.registry.suggested_concurrency(model)

    @cached_property
    def _salt_key(self) -> bytes:
        secret = self.settings.cache_salt_secret
        return salt_key(secret.encode() if secret else load_secret(self.settings))

    def cache_salt(self, project: str) -> str:
        """The `cache_salt` of the project's lines (app/pipeline/cache_salt.py)."""
        return project_salt(self._salt_key, project)

    @property
    def owner(self) -> str:
        """Who holds the leases this worker takes: the replica id."""
        return self.settings.replica_id

    @property
    def data_dir(self) -> Path:
        return self.settings.data_dir
