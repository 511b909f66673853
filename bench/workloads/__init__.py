"""Every workload of the one harness (``python -m bench --workloads ...``), by id, in the order
they run."""

from __future__ import annotations

from bench.workload import Workload
from bench.workloads.db_size import DbSize
from bench.workloads.load import Load
from bench.workloads.side_by_side_workloads import SIDE_BY_SIDE
from bench.workloads.w5_upstream import W5Upstream
from bench.workloads.w6 import W6Tenancy
from bench.workloads.w6.lanes_workload import W6Lanes
from bench.workloads.w6.quote_workload import W6Quote
from bench.workloads.w7_shared_fleet import W7SharedFleet
from bench.workloads.w8_frontend import W8Frontend
from bench.workloads.w8_layers import W8Layers
from bench.workloads.w9_million import W9Million
from bench.workloads.w10 import W10EnginesOnDemand

_ALL: tuple[Workload, ...] = (
    *SIDE_BY_SIDE.values(),
    W5Upstream(),
    W6Tenancy(),
    W6Quote(),
    W6Lanes(),
    W7SharedFleet(),
    W8Frontend(),
    W8Layers(),
    W9Million(),
    W10EnginesOnDemand(),
    Load(),
    DbSize(),
)
WORKLOADS: dict[str, Workload] = {w.id: w for w in _ALL}
# What `python -m bench` (and `make bench`) runs without --workloads: batchd against vLLM.
DEFAULT = tuple(SIDE_BY_SIDE)
