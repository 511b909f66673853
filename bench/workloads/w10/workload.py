"""W10 in the one harness: rounds of the same work on the budget and the resident system,
interleaved, and the report."""

from __future__ import annotations

import time
from dataclasses import asdict, dataclass
from typing import ClassVar

from bench.report import Report
from bench.workload import Context, parse_params, rotated
from bench.workloads.w10.checks import goal_checks, median_of, round_ratios
from bench.workloads.w10.plan import BUDGET_ENGINES, MODELS, SYSTEMS, round_plan
from bench.workloads.w10.report import SUMMARY, render
from bench.workloads.w10.run import system_round

# A system's round: its batches should end in minutes; this bounds a stuck one.
ROUND_TIMEOUT_S = 3600.0


@dataclass(frozen=True)
class W10Params:
    # Engines without torch.compile on both systems: a load of the tiny models costs seconds,
    # not the compile's minute (docs/models.md: "less with enforce_eager").
    eager: bool = True
    # The budget system's BATCHD_MIN_RESIDENCY_SECONDS (its default).
    min_residency_seconds: float = 30.0


class W10EnginesOnDemand:
    id, slug, title = "W10", "W10-engines-on-demand", "Engines on demand: three models on one resident engine"
    default_rounds = 3
    Params: ClassVar[type[W10Params]] = W10Params

    def run(self, context: Context) -> Report:
        params = parse_params(W10Params, context.params)
        eager = params.eager or context.enforce_eager
        began = time.monotonic()
        rounds = []
        for n in range(1, context.rounds + 1):
            order = rotated(SYSTEMS, n - 1)
            systems = {}
            for system in order:
                context.log(f"W10 round {n}: {system}")
                try:
                    systems[system] = system_round(
                        system,
                        context.work_dir / "W10" / f"round-{n}" / system,
                        scale=context.scale,
                        eager=eager,
                        min_residency_s=params.min_residency_seconds,
                        timeout=min(context.timeout, ROUND_TIMEOUT_S),
                        log=context.log,
                    )
                except Exception as exc:  # noqa: BLE001 - reported, and the run fails
                    context.log(f"W10 round {n}: {system} failed: {exc!r}")
                    systems[system] = {"system": system, "error": f"{type(exc).__name__}: {exc}"}
            round_ = {"round": n, "order": order, "systems": systems}
            rounds.append({**round_, "ratios": round_ratios(round_)})
        day, hour = round_plan(context.scale)
        data = {
            "models": list(MODELS),
            "budget_engines": BUDGET_ENGINES,
            **asdict(params),
            "eager": eager,
            "scale": context.scale,
            "plan": [{"batch": b.name, "model": b.model, "window": b.window, "lines": b.lines} for b in day + hour],
            "seconds": round(time.monotonic() - began, 1),
            "rounds": rounds,
            "summary": {s: {key: median_of(rounds, s, key) for key, _ in SUMMARY} for s in SYSTEMS},
            "checks": goal_checks(rounds),
        }
        return Report(self.id, self.slug, self.title, data, render, failed=run_failed(rounds))


def run_failed(rounds: list[dict]) -> bool:
    """A system that did not run, a batch that did not complete, a line lost or duplicated: the
    harness exits 1 (missed goals are reported, not an error)."""
    return any(
        run.get("error") or run.get("batches_not_completed") or run.get("lines_lost") or run.get("lines_duplicated")
        for r in rounds
        for run in r["systems"].values()
    )
