"""The queue view: every project's running and queued batches with share, ETA and risk, from
the shared database and, on a replica with a worker, its scheduler's recent rates (an API-only
replica uses each batch's average rate since it started)."""

from __future__ import annotations

import time
from collections.abc import Mapping

from app.core.statuses import BatchStatus
from app.db.engine import Database
from app.db.repositories.queue import QueueRepository
from app.domains.models.queue_schemas import ProjectQueue, Queue, QueuedBatch
from app.domains.organization.projects import list_projects
from app.scheduling.fair_share import UNKNOWN_RATE_WAIT, BatchOutlook, average_rates, outlook


def _batch(entry: BatchOutlook) -> QueuedBatch:
    b = entry.batch
    return QueuedBatch(
        id=b.id,
        model=b.model,
        status=b.status,
        completion_window=b.completion_window,
        created_at=b.created_at,
        expires_at=b.deadline,
        total=b.total,
        done=b.done,
        lines_per_second=entry.rate,
        eta=None if entry.finish_at is None else int(entry.finish_at),
        at_risk=entry.at_risk,
    )


async def queue_view(
    db: Database,
    project: str | None,
    rates: Mapping[str, float] | None = None,
    at_risk: frozenset[str] = frozenset(),
    weights: Mapping[str, float] | None = None,
    served: Mapping[str | None, float] | None = None,
    unknown_rate_wait: float = UNKNOWN_RATE_WAIT,
) -> Queue:
    """`project`'s queue, or every project's when None. Shares are worked out over every
    project's work either way. A replica's scheduler passes what it works with (recent rates,
    at-risk batches, the weights as it last read them); without, weights come from the database."""
    now = time.time()
    if weights is None:
        weights = {p.name: float(p.weight) for p in await list_projects(db)}
    async with db.read() as session:
        batches = await QueueRepository(session).active()
    views = outlook(
        batches,
        weights,
        average_rates(batches, now) if rates is None else rates,
        now,
        at_risk,
        served,
        unknown_rate_wait,
    )
    data = []
    for view in views:
        if project is not None and view.project != project:
            continue
        running = [e for e in view.batches if e.batch.status == BatchStatus.IN_PROGRESS and (e.batch.done or e.rate)]
        queued = [e for e in view.batches if e not in running]
        data.append(
            ProjectQueue(
                project=view.project,
                model=view.model,
                weight=view.weight,
                share=round(view.share, 4),
                lines_per_second=view.rate,
                running=[_batch(e) for e in running],
                queued=[_batch(e) for e in queued],
            )
        )
    return Queue(data=data)
