"""W1-W4 as workloads of the one harness: each side-by-side definition (side_by_side.py) run
by side_by_side_run.py and reported by side_by_side_report.py."""

from __future__ import annotations

from dataclasses import dataclass, fields

from bench.models import prepare_models
from bench.report import Report
from bench.systems import SYSTEMS
from bench.workload import Context
from bench.workloads.side_by_side import SIDE_BY_SIDE_SPECS, SideBySide
from bench.workloads.side_by_side_report import report
from bench.workloads.side_by_side_run import run_workload


@dataclass(frozen=True)
class SideBySideWorkload(SideBySide):
    def run(self, context: Context) -> Report:
        systems = list(context.systems or SYSTEMS)
        unavailable = {name: reason for name in systems if (reason := SYSTEMS[name].unavailable_reason())}
        result = run_workload(self, systems, prepare_models(context.work_dir), context, unavailable=unavailable)
        return report(result)


SIDE_BY_SIDE: dict[str, SideBySideWorkload] = {
    key: SideBySideWorkload(**{f.name: getattr(spec, f.name) for f in fields(spec)})
    for key, spec in SIDE_BY_SIDE_SPECS.items()
}
