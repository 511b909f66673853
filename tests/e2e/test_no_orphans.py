"""No orphans: SIGKILL of the `batchd serve` process alone (not its process group, as a
supervisor killing only the main pid does) takes its vLLM engine core and worker with it within
10 s, while they are busy. (`batchd run-batch` is covered by the resume test in
tests/runbatch.) No database is involved, so this runs once, on SQLite."""

from __future__ import annotations

import openai

from tests.conftest import API_KEYS_ENV
from tests.support.batches import CHAT_MODEL, chat_line, create, wait_for
from tests.support.engines import eager_config
from tests.support.orphans import kill_alone_and_assert_no_orphans
from tests.support.server import ServerProcess


def test_engine_processes_die_with_a_sigkilled_server(tmp_path):
    config = eager_config(tmp_path / "models.json", {CHAT_MODEL: {}})
    server = ServerProcess(tmp_path / "data", env={"BATCHD_API_KEYS": API_KEYS_ENV}, models=True,
                           args=["--model", CHAT_MODEL, "--config", str(config)])
    try:
        server.start()
        client = openai.OpenAI(base_url=server.base_url, api_key="key-a", max_retries=0)
        batch = create(client, [chat_line(f"l{i}", max_tokens=24) for i in range(500)])
        wait_for(client, batch.id, until=lambda b: b.request_counts.completed >= 20)
        took = kill_alone_and_assert_no_orphans(server.pid)
        print(f"engine processes gone {took:.2f} s after the server")
    finally:
        server.kill()  # its group: nothing should be left, but never leak engines into the suite
