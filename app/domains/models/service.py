"""What `GET /v1/models` reports: each served model, its engine state and its load.

OpenAI's model object has `id`, `object`, `created`, `owned_by`; batchd adds read-only fields
(clients keep unknown fields) so the dashboard can show what the engines are doing.

A replica with engines reports its own. It also publishes them to the database, so that a
replica started with --api-only (no engines) lists the models the others serve, merged."""

from __future__ import annotations

import time
from typing import Any

from app.core.config import Settings
from app.core.errors import NotFound
from app.core.line_errors import LineErrorCode
from app.core.statuses import EngineState
from app.core.worker_port import GateLoad, WorkerPort
from app.db.engine import Database
from app.db.repositories.served_models import ServedModelRepository
from app.engine.protocol import Engines

PUBLISH_SECONDS = 5.0
# A replica that has not published for this long has stopped (or lost the database).
STALE_AFTER_SECONDS = 3 * PUBLISH_SECONDS
# Best first: a model served by several replicas is as ready as the readiest of them.
STATE_RANK = (EngineState.READY, EngineState.STARTING, EngineState.UNLOADED, EngineState.DEAD, EngineState.STOPPED)
LOAD_FIELDS = ("lines_in_flight", "lines_waiting", "max_lines_in_flight")


def model_entries(registry: Engines | None, worker: WorkerPort | None) -> list[dict[str, Any]]:
    """One entry per model this replica serves; empty while the engines are still starting."""
    if registry is None:
        return []
    entries = []
    for card in registry.model_cards():
        # The worker's per-model admission gate counts the lines it has handed to the engine.
        load = worker.gate_load(card["id"]) if worker is not None else None
        if load is None:
            load = GateLoad(0, 0, registry.suggested_concurrency(card["id"]))
        state = registry.engine_state(card["id"])
        entries.append(
            {
                **card,
                "engine_state": state,
                "loaded": loaded(state),
                "lines_in_flight": load.in_flight,
                "lines_waiting": load.waiting,
                "max_lines_in_flight": load.capacity,
            }
        )
    return entries


def loaded(state: str) -> bool:
    """Whether a model in ``state`` has its engine loaded and taking lines: false while a model
    served on demand (``--max-resident-engines``, ``load: on-demand``) waits for one or loads it."""
    return state == EngineState.READY


async def published_entries(db: Database) -> list[dict[str, Any]]:
    """The models other replicas published lately, one entry per model: the best engine state
    among its replicas and their loads added up."""
    async with db.read() as session:
        rows = await ServedModelRepository(session).published_since(time.time() - STALE_AFTER_SECONDS)
    merged: dict[str, dict[str, Any]] = {}
    for row in rows:
        entry = merged.setdefault(
            row.model_id,
            {
                "id": row.model_id,
                "object": "model",
                "created": row.created,
                "owned_by": row.owned_by,
                "engine_state": row.engine_state,
                **dict.fromkeys(LOAD_FIELDS, 0),
            },
        )
        entry["created"] = min(entry["created"], row.created)
        entry["engine_state"] = min(entry["engine_state"], row.engine_state, key=STATE_RANK.index)
        entry["loaded"] = loaded(entry["engine_state"])
        for field in LOAD_FIELDS:
            entry[field] += getattr(row, field)
    return list(merged.values())


async def list_entries(
    settings: Settings, db: Database, registry: Engines | None, worker: WorkerPort | None
) -> list[dict[str, Any]]:
    """This replica's models; an API-only replica lists what the others publish."""
    if settings.api_only:
        return await published_entries(db)
    return model_entries(registry, worker)


async def find_entry(
    settings: Settings, db: Database, registry: Engines | None, worker: WorkerPort | None, model_id: str
) -> dict[str, Any]:
    for entry in await list_entries(settings, db, registry, worker):
        if entry["id"] == model_id:
            return entry
    # OpenAI's wording for an unknown model.
    raise NotFound(
        f"The model `{model_id}` does not exist or you do not have access to it.", code=LineErrorCode.MODEL_NOT_FOUND
    )
