"""Concurrent duplicates with one `Idempotency-Key` sent to two real `batchd serve` replicas over
one database: one request does the work, every other returns its object (the rules:
app/http/idempotency_store.py; the API behaviour is tested in process, tests/http/test_idempotency.py)."""

from __future__ import annotations

from concurrent.futures import ThreadPoolExecutor

import pytest

from harness.client import openai_client
from harness.server import ServerProcess
from tests.support.batches import chat_line, jsonl

# Real `batchd serve` processes, without models: not in make test-fast (tests/conftest.py).
pytestmark = pytest.mark.engine

SENDERS = 8


def test_duplicates_raced_over_two_replicas_make_one_file_and_one_batch(start_server, request):
    env = {"BATCHD_API_KEYS": "key-a=proj-a"}
    first = start_server(env)
    second = ServerProcess(first.data_dir, first.database_url, env=env, s3=first.s3).start()
    try:
        clients = [openai_client(server.base_url, "key-a", timeout=120) for server in (first, second)]
        key = {"Idempotency-Key": request.node.name}
        data = jsonl([chat_line(f"line-{i}") for i in range(50)])
        before = {f.id for f in clients[0].files.list(limit=100).data}

        def upload(n: int) -> str:
            return clients[n % 2].files.create(file=("in.jsonl", data), purpose="batch", extra_headers=key).id

        with ThreadPoolExecutor(SENDERS) as pool:
            file_ids = set(pool.map(upload, range(SENDERS)))
        assert len(file_ids) == 1, file_ids
        assert {f.id for f in clients[1].files.list(limit=100).data} - before == file_ids
        [file_id] = file_ids

        batch_key = {"Idempotency-Key": request.node.name + "-batch"}

        def create(n: int) -> str:
            return (
                clients[n % 2]
                .batches.create(
                    input_file_id=file_id,
                    endpoint="/v1/chat/completions",
                    completion_window="24h",
                    extra_headers=batch_key,
                )
                .id
            )

        with ThreadPoolExecutor(SENDERS) as pool:
            batch_ids = set(pool.map(create, range(SENDERS)))
        assert len(batch_ids) == 1, batch_ids
        made = [b.id for b in clients[0].batches.list(limit=100).data if b.input_file_id == file_id]
        assert made == list(batch_ids)
    finally:
        second.stop()
