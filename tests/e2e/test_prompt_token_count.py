"""Prompt tokens counted at validation with the model's own tokenizer (in process) are the tokens
the engine then reports as the lines' prompt tokens: chat lines through the chat template,
embedding inputs as they are."""

from __future__ import annotations

import subprocess

from harness.client import openai_client
from harness.server import BATCHD
from tests.support import db
from tests.support.batches import chat_line, create, embedding_line, wait_for

PROJECT, KEY = "proj-b", "key-b"


def _set_limit(server, limit: str) -> None:
    cmd = [str(BATCHD), "projects", "set", PROJECT, "--max-enqueued-tokens", limit, "--data-dir", str(server.data_dir)]
    if server.database_url:
        cmd += ["--database-url", server.database_url]
    subprocess.run(cmd, check=True, capture_output=True, timeout=120)


def test_counted_prompt_tokens_are_the_engines_prompt_tokens(model_server):
    client = openai_client(model_server.base_url, KEY)
    _set_limit(model_server, str(10**12))  # a limit applies, so validation counts
    try:
        chats = [chat_line(f"c{i}", "Tell me a story " * (1 + i % 5), max_tokens=2) for i in range(20)]
        embeds = [embedding_line(f"e{i}", "a sentence to embed " * (1 + i % 3)) for i in range(10)]
        for lines, endpoint in ((chats, "/v1/chat/completions"), (embeds, "/v1/embeddings")):
            done = wait_for(client, create(client, lines, endpoint=endpoint).id, timeout=300)
            assert done.status == "completed" and done.request_counts.completed == len(lines), done
            [(counted,)] = db.execute(model_server, "SELECT prompt_tokens FROM batches WHERE id = :b", b=done.id)
            assert counted == done.usage.input_tokens > 0
    finally:
        _set_limit(model_server, "default")
