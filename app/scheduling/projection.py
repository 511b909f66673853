"""Where a batch not yet submitted would land in the queue (POST /v1/batches/estimate): the
same arithmetic as the queue's outlook (app.scheduling.fair_share), with the new batch put in.

Its lines wait behind the lines left in its project's batches on the model due before it (a
project's batches run earliest deadline first) and then run at the project's rate: its measured
one while it runs batches of the model, else its fair share of what the model serves (the
running batches' measured rates, or when none runs, its throughput in recently finished ones).
With no rate known, nothing is projected."""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass

from app.core.statuses import BatchStatus
from app.scheduling.fair_share import RISK_MARGIN, outlook
from app.scheduling.state import BatchProgress

# The id the new batch goes by in the calculation (no batch id has this form).
NEW_BATCH = "batch.estimate"


@dataclass(frozen=True)
class Projection:
    rate: float | None  # lines/s the projection used; None when none is known
    start_at: float | None
    finish_at: float | None
    feasible: bool | None  # finishes before it expires
    at_risk: bool | None  # in the last RISK_MARGIN of its window, as the scheduler counts it


def throughput(finished: Iterable[tuple[int, float]]) -> float | None:
    """Lines per second over finished batches' (lines, seconds running); None without any."""
    lines = seconds = 0.0
    for count, span in finished:
        if count > 0 and span > 0:
            lines += count
            seconds += span
    return lines / seconds if seconds else None


def project_new_batch(
    batches: Iterable[BatchProgress],
    weights: Mapping[str, float],
    rates: Mapping[str, float],
    now: float,
    *,
    project: str,
    model: str,
    lines: int,
    deadline: int,
    finished_rate: float | None,
) -> Projection:
    """The new batch of `lines` lines of `project` on `model`, among `batches` (the queue's
    running and waiting ones) with their measured `rates`; `finished_rate` is the model's
    throughput in recently finished batches."""
    queued = list(batches)
    new = BatchProgress(NEW_BATCH, project, model, BatchStatus.IN_PROGRESS, "", int(now), deadline, None, lines, 0)
    view = next(v for v in outlook([*queued, new], weights, rates, now) if v.model == model and v.project == project)
    model_rate = sum(rates.get(b.id, 0.0) for b in queued if b.model == model)
    if view.rate:  # the project runs batches of the model: its new one shares the project's rate
        rate: float | None = view.rate
    else:
        serving = model_rate if model_rate > 0 else finished_rate
        rate = None if serving is None else view.share * serving
    if not rate:
        return Projection(None, None, None, None, None)
    ahead = 0
    for entry in view.batches:  # earliest deadline first
        if entry.batch.id == NEW_BATCH:
            break
        if entry.batch.runnable:
            ahead += entry.left
    start_at = now + ahead / rate
    finish_at = start_at + lines / rate
    margin = RISK_MARGIN * (deadline - now)
    return Projection(rate, start_at, finish_at, finish_at <= deadline, finish_at > deadline - margin)
