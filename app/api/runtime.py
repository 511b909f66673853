"""The server's runtime, typed: everything the routes read that lives as long as the process
(settings, database, blob store, the engines and the worker once they are up).
The app factory builds it (app/http/app.py) and keeps it on `app.state`; everything else reads
it through `runtime_of` or the `RuntimeDep` dependency (app/api/deps.py), never `app.state`.
Metrics are not on it: they are process-wide, in app/core/metrics.py's own registry."""

from __future__ import annotations

import asyncio
from dataclasses import dataclass, field

from starlette.applications import Starlette

from app.api.monitoring import BatchCounts
from app.api.route_caps import CostlyRouteCaps
from app.core.config import Settings
from app.core.worker_port import WorkerPort
from app.db.engine import Database
from app.engine.config.specs import ModelTable
from app.engine.protocol import Engines
from app.storage.base import BlobStore


@dataclass
class Runtime:
    settings: Settings
    db: Database
    store: BlobStore
    loop: asyncio.AbstractEventLoop
    # None while the engines load (the API serves files and /health meanwhile).
    engines: Engines | None = None
    # None while the engines load, and on an --api-only replica (no worker at all).
    worker: WorkerPort | None = None
    # The model config's prices and context lengths, read once as the engines start.
    models: ModelTable = field(default_factory=ModelTable)
    # True once the engines are up (or none are to be), False again from shutdown on.
    ready: bool = False
    # Why the engines could not start (then `batchd serve` exits non-zero), None otherwise.
    engines_failed: str | None = None
    # When /health's database check began failing (monotonic), None while it answers: readiness
    # holds through a blip shorter than readiness_db_grace_seconds.
    database_down_since: float | None = None
    # The `/metrics` scrape's batch counts, read at most once per metrics_cache_seconds.
    batch_counts: BatchCounts = field(default_factory=BatchCounts)
    # The caps on costly routes' requests in flight here (per replica: each counts its own).
    caps: CostlyRouteCaps = field(init=False)

    def __post_init__(self) -> None:
        self.caps = CostlyRouteCaps.from_settings(self.settings)

    def wake_worker(self, batch_id: str | None = None) -> None:
        """Wake this replica's worker now (`batch_id`: a batch whose shards running here must
        re-read its status). No worker while the engines load (it claims queued batches when it
        starts), nor on an --api-only replica (another replica's poll finds the batch)."""
        if self.worker is not None:
            self.worker.wake(batch_id)


def install_runtime(app: Starlette, runtime: Runtime) -> None:
    app.state.runtime = runtime


def runtime_of(app: Starlette) -> Runtime:
    """The app's runtime; only its lifespan's startup sets it, so requests always find one."""
    runtime = app.state.runtime
    assert isinstance(runtime, Runtime), "the app's lifespan sets the runtime before serving"
    return runtime


def runtime_if_started(app: Starlette) -> Runtime | None:
    """The runtime, or None before the lifespan has set it (a signal may arrive that early)."""
    runtime = getattr(app.state, "runtime", None)
    return runtime if isinstance(runtime, Runtime) else None
