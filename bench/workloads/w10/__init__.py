"""W10, engines on demand (issue #49): several models on a fixed engine budget against the same
work with every model resident.

Each round runs the same work twice, a fresh `batchd serve` each, in alternating order:
**budget** (`--max-resident-engines 1`) and **resident** (no limit), each serving three models
in process: the built-in tiny chat model under two names (two engines) and MiniLM embeddings.
The work: each model's two 24h batches, then, two seconds later, each model's 1h batch. Measured
per system: makespan, every batch's finish against its window, engine loads and load seconds
(the metrics), busy fraction (`/v1/models` sampled), and every line's output once.

    .venv/bin/python -m bench --workloads W10 [--rounds 3] [--scale 1.0] [--param eager=true]

The package: ``plan`` (models, batches, servers), ``run`` (one system's round), ``measure``
(the measures, pure), ``checks`` (the goals), ``report`` (the Markdown), ``workload`` (the
harness's entry).
"""

from __future__ import annotations

from bench.workloads.w10.workload import W10EnginesOnDemand

__all__ = ["W10EnginesOnDemand"]
