"""What one system's round measured, from what was observed (pure: the unit tests feed it
synthetic runs).

- **makespan**: from the first create call sent to the last batch seen ended (polled);
- **a batch's finish**: seconds from its own create call to its end seen; met when it completed
  within its completion window;
- **busy**: the time some model had its engine loaded (`/v1/models` card `loaded`) and lines in
  flight on it (`lines_in_flight`), sampled every SAMPLE_S; a model whose lines wait for their
  engine (not loaded, or loading) counts as idle. **Busy fraction** = busy time / makespan;
- **idle while work waits**: makespan less busy: the seconds within the makespan (work waits
  throughout it) in which no engine ran a line (a swap, an engine warming up, the scheduler's pauses);
- **no engine**: the time no model had its engine loaded (a swap: unloading, then loading);
- **loads** and **load seconds**: `batchd_engine_loads_total` and `batchd_engine_load_seconds_sum`
  over every model, the end's scrape minus the one before the first create (loads at start-up
  are not counted: every engine starts once on both systems);
- **lines**: every batch's output and error files against its input's custom_ids: lost (in
  neither file), duplicated (more than once across the two), failed (in the error file).
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass

from bench.workloads.w10.plan import Planned

SAMPLE_S = 0.5
LOADS = "batchd_engine_loads_total"
LOAD_SECONDS = "batchd_engine_load_seconds_sum"


@dataclass(frozen=True)
class Sample:
    """One look at `/v1/models`: seconds after the first create, and per model whether its
    engine is loaded and how many lines it has in flight."""

    t: float
    loaded: Mapping[str, bool]
    in_flight: Mapping[str, int]

    @property
    def busy(self) -> bool:
        return any(self.loaded.get(model) and n > 0 for model, n in self.in_flight.items())


def seconds_where(samples: Sequence[Sample], end: float, holds: Callable[[Sample], bool]) -> float:
    """Time from 0 to ``end`` during which ``holds``: each sample's state lasts until the next
    sample (the last one's until ``end``)."""
    total = 0.0
    ordered = sorted(samples, key=lambda s: s.t)
    stops = [s.t for s in ordered[1:]] + [end] if ordered else []
    for this, next_t in zip(ordered, stops, strict=True):
        start, stop = max(0.0, this.t), min(end, next_t)
        if holds(this) and stop > start:
            total += stop - start
    return total


def busy_seconds(samples: Sequence[Sample], end: float) -> float:
    """Time from 0 to ``end`` during which the engines ran lines."""
    return seconds_where(samples, end, lambda s: s.busy)


def swapping_seconds(samples: Sequence[Sample], end: float) -> float:
    """Time from 0 to ``end`` with no engine loaded: a swap's unload and load."""
    return seconds_where(samples, end, lambda s: not any(s.loaded.values()))


def loads_seen(samples: Sequence[Sample]) -> int:
    """How many times a model's engine became loaded after the first sample (a cross-check of
    the loads counter: a load shorter than SAMPLE_S between two samples can be missed)."""
    count = 0
    for before, after in zip(samples, samples[1:], strict=False):
        count += sum(1 for model, up in after.loaded.items() if up and not before.loaded.get(model))
    return count


def counter_delta(before: Mapping[str, float], after: Mapping[str, float]) -> dict[str, float]:
    """Per model, ``after`` minus ``before`` (a model first seen at the end started from 0)."""
    return {model: after[model] - before.get(model, 0.0) for model in sorted(after)}


def line_tally(expected: Iterable[str], output_ids: Sequence[str], error_ids: Sequence[str]) -> dict[str, int]:
    """A batch's lines against its input: lost, duplicated and failed custom_ids."""
    seen = Counter([*output_ids, *error_ids])
    wanted = set(expected)
    return {
        "expected": len(wanted),
        "output": len(output_ids),
        "failed": len(set(error_ids)),
        "lost": len(wanted - set(seen)),
        "duplicated": sum(1 for n in seen.values() if n > 1),
        "unexpected": len(set(seen) - wanted),
    }


def batch_row(batch: Planned, created_s: float, ended_s: float | None, status: str, tally: dict[str, int]) -> dict:
    """One batch: when it was created and ended (seconds after the first create), its finish
    after its own create, and whether it completed within its window."""
    finish = None if ended_s is None else round(ended_s - created_s, 2)
    return {
        "batch": batch.name,
        "model": batch.model,
        "window": batch.window,
        "lines": batch.lines,
        "created_s": round(created_s, 2),
        "ended_s": None if ended_s is None else round(ended_s, 2),
        "finish_s": finish,
        "status": status,
        "deadline_met": status == "completed" and finish is not None and finish <= batch.deadline_s,
        **tally,
    }


def system_measures(
    rows: Sequence[dict],
    samples: Sequence[Sample],
    loads: Mapping[str, float],
    load_seconds: Mapping[str, float],
) -> dict:
    """A system's round from its batches' rows, its samples and its counters' deltas."""
    ends = [r["ended_s"] for r in rows]
    makespan = max(ends) if rows and None not in ends else None
    busy = busy_seconds(samples, makespan) if makespan else None
    hour = [r for r in rows if r["window"] == "1h"]
    finishes = [r["finish_s"] for r in hour if r["finish_s"] is not None]
    return {
        "makespan_s": None if makespan is None else round(makespan, 2),
        "busy_s": None if busy is None else round(busy, 2),
        "busy_fraction": round(busy / makespan, 3) if busy is not None and makespan else None,
        "idle_waiting_s": round(makespan - busy, 2) if busy is not None and makespan else None,
        "loads": int(round(sum(loads.values()))),
        "loads_by_model": {m: int(round(n)) for m, n in loads.items() if n},
        "load_seconds": round(sum(load_seconds.values()), 2),
        "no_engine_s": round(swapping_seconds(samples, makespan), 2) if makespan else None,
        "loads_seen": loads_seen(samples),
        "worst_1h_finish_s": max(finishes) if len(finishes) == len(hour) and hour else None,
        "hour_batches_missed": [r["batch"] for r in hour if not r["deadline_met"]],
        "deadlines_missed": [r["batch"] for r in rows if not r["deadline_met"]],
        "batches_not_completed": [r["batch"] for r in rows if r["status"] != "completed"],
        "lines_lost": sum(r["lost"] for r in rows),
        "lines_duplicated": sum(r["duplicated"] for r in rows),
        "lines_failed": sum(r["failed"] for r in rows),
    }


def engine_timeline(samples: Sequence[Sample]) -> list[list]:
    """When each model's engine was seen loaded and unloaded: [seconds, model, "loaded" |
    "unloaded"], from the first sample's loaded engines on."""
    events: list[list] = []
    previous: Mapping[str, bool] = {}
    for sample in samples:
        for model, up in sample.loaded.items():
            if bool(up) != bool(previous.get(model)) and (up or model in previous):
                events.append([round(sample.t, 1), model, "loaded" if up else "unloaded"])
        previous = sample.loaded
    return events
