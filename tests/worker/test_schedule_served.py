"""The rate the scheduler projects a model serving nothing at (engines on demand, #58): its
rate when it last served here, else its throughput in its recently finished batches (read at
most every PRIOR_TTL_SECONDS), else in its running batches so far, else none."""

from __future__ import annotations

import asyncio
from contextlib import asynccontextmanager

from app.core.statuses import BatchStatus
from app.scheduling.state import BatchProgress
from app.worker import schedule as schedule_module
from app.worker.schedule import PRIOR_TTL_SECONDS, SERVED_SAMPLES, Schedule


class _Db:
    @asynccontextmanager
    async def read(self):
        yield None


def _batch(batch_id: str, model: str, done: int = 0) -> BatchProgress:
    return BatchProgress(batch_id, "p", model, BatchStatus.IN_PROGRESS, "24h", 0, 86_400, 0, 1_000, done)


def test_a_model_not_served_here_yet_is_projected_at_its_running_batches_progress(monkeypatch):
    """After a restart: a batch of `embed` had 400 lines done before (by another process),
    none since; `embed` has no finished batch. 400 lines in the 40 s since it started: 10/s."""

    class Queue:
        def __init__(self, session) -> None:
            pass

        async def finished_runs(self, model: str, last: int) -> list[tuple[int, float]]:
            return []

    monkeypatch.setattr(schedule_module, "QueueRepository", Queue)
    schedule = Schedule(_Db(), "replica", 0.5)
    batches = [_batch("e1", "embed", done=400), _batch("c1", "chat")]
    served = asyncio.run(schedule._served_rates(batches, {"e1": 0.0, "c1": 0.0}, 40.0))
    assert served == {"embed": 10.0}


def test_a_model_is_projected_at_its_last_served_rate_else_its_finished_batches_throughput(monkeypatch):
    reads: list[str] = []

    class Queue:
        def __init__(self, session) -> None:
            pass

        async def finished_runs(self, model: str, last: int) -> list[tuple[int, float]]:
            reads.append(model)
            return [(600, 60.0)] if model == "chat" else []

    monkeypatch.setattr(schedule_module, "QueueRepository", Queue)
    schedule = Schedule(_Db(), "replica", 0.5)
    batches = [_batch("e1", "embed"), _batch("c1", "chat"), _batch("x1", "never")]

    async def scenario():
        # embed serves 30 lines/s for a while, then stalls (swapped out): the tail of its drain
        # (a few low samples) barely moves its served rate.
        for _ in range(SERVED_SAMPLES - 5):
            await schedule._served_rates(batches, {"e1": 30.0, "c1": 0.0}, 0.0)
        for tail in (10.0, 5.0, 1.0):
            await schedule._served_rates(batches, {"e1": tail, "c1": 0.0}, 1.0)
        served = await schedule._served_rates(batches, {"e1": 0.0, "c1": 0.0}, 2.0)
        again = await schedule._served_rates(batches, {"e1": 0.0, "c1": 0.0}, 2.0 + PRIOR_TTL_SECONDS)
        return served, again

    served, again = asyncio.run(scenario())
    # embed: its last served rate; chat never served here: 600 lines in 60 s of its finished
    # batches; `never` has neither: no rate (its stalled batches are at risk once they have
    # waited a quarter of their window).
    assert served == {"embed": 30.0, "chat": 10.0} and again == served
    # The finished batches are read once per model per PRIOR_TTL_SECONDS, not every refresh.
    assert sorted(reads) == ["chat", "chat", "never", "never"]
