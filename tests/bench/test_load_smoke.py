"""The load test's clients (bench/workloads/load) in small: 5 clients for 10 s against the shared model server,
so it cannot rot. No latency target here; zero errors and nothing lost are required."""

from __future__ import annotations

import asyncio

import pytest

from bench.workloads.load.clients import LoadConfig, percentiles, run_load
from bench.workloads.load.verify import verify


# One backend: the clients' checks are the point, and the API they call is tested on every backend.
@pytest.mark.parametrize("backend", ["sqlite"], indirect=True)
def test_load_harness_smoke(model_server):
    config = LoadConfig(clients=5, duration_s=10, think_s=0.1, lines_per_batch=4, max_tokens=8)
    stats = asyncio.run(run_load(model_server.base_url, "key-load", config))
    assert stats.errors == []
    assert {"files.create", "batches.create", "batches.retrieve"} <= set(stats.latencies)
    assert stats.batches and stats.files
    checked = asyncio.run(verify(model_server.base_url, "key-load", stats, timeout_s=300))
    assert checked["problems"] == []
    assert checked["files_checked"] == len(stats.files)
    assert percentiles(stats.latencies["batches.retrieve"])["p99"] > 0
