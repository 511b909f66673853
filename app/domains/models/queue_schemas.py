"""The queue view (`GET /v1/queue`, batchd's own): each project's running and queued batches,
its fair share, rate, the batches' projected finish and whether they are at risk."""

from __future__ import annotations

from typing import Literal

from pydantic import BaseModel


class QueuedBatch(BaseModel):
    id: str
    model: str | None
    status: str
    completion_window: str
    created_at: int
    expires_at: int  # the deadline
    total: int
    done: int
    lines_per_second: float | None  # lately; null until measured
    eta: int | None  # projected finish (unix seconds); null while the project's rate is unknown
    at_risk: bool  # projected to miss its deadline at fair share: runs ahead of it


class ProjectQueue(BaseModel):
    project: str
    model: str | None
    weight: float
    share: float  # of the model's lines while the other projects with work keep theirs
    lines_per_second: float | None
    running: list[QueuedBatch]
    queued: list[QueuedBatch]


class Queue(BaseModel):
    object: Literal["queue"] = "queue"
    data: list[ProjectQueue]
