"""`GET /v1/queue`: the caller's project's running and queued batches (every project's for an
admin key), its share, ETAs and at-risk batches (batchd's own route; the dashboard's queue page)."""

from __future__ import annotations

from fastapi import APIRouter

from app.api.deps import RuntimeDep
from app.domains.models.queue import queue_view
from app.domains.models.queue_schemas import Queue
from app.domains.organization.deps import CallerDep
from app.schemas.common import ERROR_RESPONSES

router = APIRouter(prefix="/queue", tags=["queue"], responses=ERROR_RESPONSES)


@router.get("", response_model=Queue)
async def get_queue(runtime: RuntimeDep, caller: CallerDep) -> Queue:
    project = None if caller.is_admin else caller.project
    wait = runtime.settings.at_risk_unknown_rate_wait
    if runtime.worker is None:  # engines loading, or --api-only: weights come from the database
        return await queue_view(runtime.db, project, unknown_rate_wait=wait)
    snapshot = runtime.worker.queue_snapshot()
    return await queue_view(
        runtime.db,
        project,
        snapshot.rates,
        snapshot.at_risk,
        snapshot.weights,
        served=snapshot.served,
        unknown_rate_wait=wait,
    )
