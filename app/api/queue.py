"""`GET /v1/queue`: the caller's project's running and queued batches (every project's for an
admin key), its share, ETAs and at-risk batches (batchd's own route; the dashboard's queue page)."""

from __future__ import annotations

from fastapi import APIRouter, Request

from app.api.deps import CallerDep
from app.schemas.common import ERROR_RESPONSES
from app.schemas.queue import Queue
from app.services.queue import queue_view

router = APIRouter(prefix="/queue", tags=["queue"], responses=ERROR_RESPONSES)


@router.get("", response_model=Queue)
async def get_queue(request: Request, caller: CallerDep) -> Queue:
    project = None if caller.is_admin else caller.project
    worker = request.app.state.worker
    schedule = worker.ctx.schedule if worker is not None else None
    if schedule is None:
        return await queue_view(request.app.state.db, project)
    return await queue_view(request.app.state.db, project, schedule.rates(), schedule.at_risk_ids, schedule.weights())
