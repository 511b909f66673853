"""The server's runtime, typed: everything the routes read that lives as long as the process
(settings, database, blob store, authenticator, the engines and the worker once they are up).
The app factory builds it (app/http/app.py) and keeps it on `app.state`; everything else reads
it through `runtime_of` or the `RuntimeDep` dependency (app/api/deps.py), never `app.state`.
Metrics are not on it: they are process-wide, in app/core/metrics.py's own registry."""

from __future__ import annotations

import asyncio
from dataclasses import dataclass

from starlette.applications import Starlette

from app.core.config import Settings
from app.core.worker_port import WorkerPort
from app.db.engine import Database
from app.engine.protocol import Engines
from app.services.organization.auth import Authenticator
from app.storage.base import BlobStore


@dataclass
class Runtime:
    settings: Settings
    db: Database
    store: BlobStore
    auth: Authenticator
    loop: asyncio.AbstractEventLoop
    # None while the engines load (the API serves files and /health meanwhile).
    engines: Engines | None = None
    # None while the engines load, and on an --api-only replica (no worker at all).
    worker: WorkerPort | None = None
    # True once the engines are up (or none are to be), False again from shutdown on.
    ready: bool = False

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
