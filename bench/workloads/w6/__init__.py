"""W6, tenancy: projects sharing batchd replicas (one Postgres, one blob directory) in front of
fake upstream fleets that serve their waiting queues as vLLM's priority scheduler does (lowest
priority first, then arrival; harness/fake_upstream.py), shares read from the fleets' own
request logs; and a smaller check on an in-process engine, shares read from the batches'
request counts.

Every scenario runs on batchd's defaults (shard size, windows, leases). The twenty-team
scenarios configure their models with ``priority: true``, as a fleet started with vLLM's
``--scheduling-policy priority`` is configured, so batchd's priorities reach the fleet's queue.

Scenarios (issues #25, #33):

- ``three``, ``weighted``, ``deadline`` (two replicas): team-a queues 10 batches, then team-b 1
  batch, then team-c a small one (weights 1:1:1, or 2:1:1 for ``weighted``); one project's 1h
  batch created behind its 24h batch of the same size.
- ``three-one-replica``: ``three`` on one replica.
- ``twenty``: two replicas, two models (a fleet of 16 slots each), 20 projects with weights 1-4
  and mixed 1h/24h batches of 60-6,000 lines, five of them also on the second model; small
  batches at the start and while the big ones run (a 21st team's among them); then ``deadline``
  on the same cluster.
- ``twenty-at-slots``: ``twenty`` with batchd's upstream window at the fleet's slots
  (BATCHD_UPSTREAM_WINDOW_SURPLUS=0) instead of above them (the default).
- ``inprocess``: five projects with weights 1-4 sharing the built-in tiny chat model, in-process
  on one replica.

    .venv/bin/python -m bench --workloads W6 [--scale 1.0] [--rounds 3] [--param scenarios=three,twenty,...]

The package: ``fleet`` (the clusters and fleets), ``plan`` (the twenty teams' batches),
``three``, ``twenty`` and ``inprocess`` (the scenarios), ``measure`` (shares from the fleets'
logs), ``checks`` (the goals), ``report`` (the Markdown) and ``workload`` (the harness's entry).
"""

from __future__ import annotations

from bench.workloads.w6.workload import W6Tenancy

__all__ = ["W6Tenancy"]
