"""The plain data the scheduling rules work on, as the queue repository reads it."""

from __future__ import annotations

from dataclasses import dataclass

from app.core.statuses import BatchStatus


@dataclass(frozen=True)
class BatchProgress:
    id: str
    project: str
    model: str | None
    status: str
    completion_window: str
    created_at: int
    # The deadline the scheduler works to (`Batch.deadline`): the batch's `due_at` when it has
    # one (a background response's lane), else its `expires_at` (the hard expiry).
    deadline: int
    in_progress_at: int | None
    total: int
    done: int  # completed + failed

    @property
    def runnable(self) -> bool:
        return self.status == BatchStatus.IN_PROGRESS and self.done < self.total


@dataclass(frozen=True)
class Claimable:
    """A running batch with at least one shard free to claim; `resumed` when one of them was
    started before (given back or abandoned)."""

    batch_id: str
    project: str
    model: str | None
    deadline: int  # the deadline that orders its work, as BatchProgress.deadline
    seq: int
    resumed: bool


@dataclass(frozen=True)
class RunningShard:
    """Shards under a live lease: whose, of which batch, where, for which model."""

    project: str
    model: str | None
    replica: str
    count: int = 1
    batch_id: str = ""
