"""The bounded-memory guarantee at scale: a 100,000-line batch on one SQLite replica, in front
of a zero-latency fake upstream, ends with every custom_id exactly once in its output file and
the server's resident memory grown by less than 60 MB over the whole run (upload, validation,
shards, checkpoints, finalize, download)."""

from __future__ import annotations

import json

import pytest

from harness.client import openai_client
from harness.fake_fleet import FakeFleet, upstream_config
from harness.poll import wait_for_batch
from harness.rss import TreeRss
from harness.server import ServerProcess

# Servers in front of fake upstream fleets, no vLLM: not in make test-fast (tests/conftest.py).
pytestmark = pytest.mark.engine

LINES = 100_000
MB = 1 << 20
# About 25 MB of it is the same at any size (buffers, pools, the id set's first arrays): 60 MB
# still fails a server that keeps 350 bytes or more a line, as a dict or a string a line would
# (W9 runs a million lines).
MAX_GROWTH = 60 * MB
MODEL = "sim-embed"


def _input() -> bytes:
    return b"".join(
        b'{"custom_id":"c-%d","method":"POST","url":"/v1/embeddings","body":{"model":"%s","input":"line %d"}}\n'
        % (i, MODEL.encode(), i)
        for i in range(LINES)
    )


def test_100k_lines_every_custom_id_once_in_bounded_memory(tmp_path):
    fleet = FakeFleet(tmp_path, count=2, max_concurrency=64).start()
    config = upstream_config(
        tmp_path / "models.json",
        {MODEL: {"urls": fleet.urls, "model": fleet.model, "max_concurrency": 64, "endpoints": ["/v1/embeddings"]}},
    )
    server = ServerProcess(
        tmp_path / "server",
        env={"BATCHD_API_KEYS": "key", "BATCHD_MAX_BATCH_LINES": str(LINES)},
        models=True,
        args=["--config", str(config)],
    )
    try:
        server.data_dir.mkdir()
        server.start()
        client = openai_client(server.base_url, "key", timeout=120)
        with TreeRss(server.pid, interval=0.1) as rss:
            file = client.files.create(file=("big.jsonl", _input()), purpose="batch")
            batch = client.batches.create(input_file_id=file.id, endpoint="/v1/embeddings", completion_window="24h")
            batch = wait_for_batch(client, batch.id, timeout=600, interval=0.5)
            assert batch.status == "completed", batch
            assert (batch.request_counts.completed, batch.request_counts.failed) == (LINES, 0)
            assert batch.error_file_id is None
            seen: set[str] = set()
            with client.files.with_streaming_response.content(batch.output_file_id) as response:
                for raw in response.iter_lines():
                    record = json.loads(raw)
                    assert record["custom_id"] not in seen, record["custom_id"]
                    assert record["response"]["status_code"] == 200
                    seen.add(record["custom_id"])
        assert seen == {f"c-{i}" for i in range(LINES)}
        assert rss.growth < MAX_GROWTH, f"server RSS grew {rss.growth / MB:.0f} MB"
    finally:
        server.stop()
        fleet.stop()
