"""The systems compared, by name, in the order they run."""

from __future__ import annotations

from bench.systems.base import RunSpec, System
from bench.systems.limit import LimitSystem
from bench.systems.peer import PeerSystem
from bench.systems.runbatch import RunBatchSystem
from bench.systems.server import ServerSystem

SYSTEMS: dict[str, System] = {s.name: s for s in (LimitSystem(), PeerSystem(), RunBatchSystem(), ServerSystem())}
BATCHD_SYSTEMS = ("runbatch", "server")

__all__ = ["BATCHD_SYSTEMS", "SYSTEMS", "RunSpec", "System"]
