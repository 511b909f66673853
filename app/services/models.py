"""What `GET /v1/models` reports: each served model, its engine state and its load.

OpenAI's model object has `id`, `object`, `created`, `owned_by`; batchd adds read-only fields
(clients keep unknown fields) so the dashboard can show what the engines are doing."""

from __future__ import annotations

from typing import Any

from app.errors import NotFound


def model_entries(registry: Any, worker: Any) -> list[dict[str, Any]]:
    """One entry per served model; empty while the engines are still starting."""
    if registry is None:
        return []
    # The worker's per-model admission gates count the lines it has handed to each engine.
    gates = worker.ctx.gates if worker is not None else {}
    entries = []
    for card in registry.model_cards():
        gate = gates.get(card["id"])
        in_flight, waiting = gate.load() if gate is not None else (0, 0)
        entries.append({
            **card,
            "engine_state": registry.engine_state(card["id"]),
            "lines_in_flight": in_flight,
            "lines_waiting": waiting,
            "max_lines_in_flight": gate.capacity if gate is not None else registry.suggested_concurrency(card["id"]),
        })
    return entries


def model_entry(registry: Any, worker: Any, model_id: str) -> dict[str, Any]:
    for entry in model_entries(registry, worker):
        if entry["id"] == model_id:
            return entry
    # OpenAI's wording for an unknown model.
    raise NotFound(
        f"The model `{model_id}` does not exist or you do not have access to it.", code="model_not_found"
    )
