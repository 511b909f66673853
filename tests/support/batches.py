"""Helpers for batch tests: build input files, wait for statuses (harness/poll.py), read result files."""

from __future__ import annotations

import contextlib
import json

import openai

# The tests' names for the one batch poll (harness/poll.py).
from harness.poll import TERMINAL  # noqa: F401
from harness.poll import wait_for_batch as wait_for  # noqa: F401

CHAT_MODEL = "batchd-tiny-chat"
EMBED_MODEL = "all-MiniLM-L6-v2"
# Bound on the waits that are 3 s goals in bench W6 on a quiet host (docs/sharing.md): the suite
# runs on a busy host whose speed drifts by up to twice.
SLOW_HOST_SECONDS = 10.0


def jsonl(lines: list[dict]) -> bytes:
    return b"".join(json.dumps(line).encode() + b"\n" for line in lines)


def chat_lines(n: int, model: str, prefix: str, text: str = "hello") -> list[dict]:
    """`n` chat lines for `model` whose body is only the model and one message (no max_tokens:
    the limit tests count what a model's own bound makes of it)."""
    return [
        {
            "custom_id": f"{prefix}-{i}",
            "method": "POST",
            "url": "/v1/chat/completions",
            "body": {"model": model, "messages": [{"role": "user", "content": text}]},
        }
        for i in range(n)
    ]


def chat_line(custom_id: str, text: str = "Hello world!", max_tokens: int = 8, **body) -> dict:
    return {
        "custom_id": custom_id,
        "method": "POST",
        "url": "/v1/chat/completions",
        "body": {
            "model": CHAT_MODEL,
            "messages": [{"role": "user", "content": text}],
            "max_tokens": max_tokens,
            "temperature": 0,
            **body,
        },
    }


def embedding_line(custom_id: str, text: str = "a sentence to embed") -> dict:
    return {
        "custom_id": custom_id,
        "method": "POST",
        "url": "/v1/embeddings",
        "body": {"model": EMBED_MODEL, "input": text},
    }


def upload(client: openai.OpenAI, lines: list[dict] | bytes, name: str = "input.jsonl"):
    data = lines if isinstance(lines, bytes) else jsonl(lines)
    return client.files.create(file=(name, data), purpose="batch")


def create(client: openai.OpenAI, lines, endpoint: str = "/v1/chat/completions", window: str = "24h", **kw):
    file = upload(client, lines)
    return client.batches.create(input_file_id=file.id, endpoint=endpoint, completion_window=window, **kw)


def cancel_in_cleanup(client: openai.OpenAI, batch_id: str):
    """Cancel a test's batch in its `finally` and wait until it ends. The batch may have ended
    between the test's last read and here on a quiet host: then there is nothing to cancel."""
    with contextlib.suppress(openai.ConflictError):
        client.batches.cancel(batch_id)
    return wait_for(client, batch_id)


def read_lines(client: openai.OpenAI, file_id: str | None) -> list[dict]:
    if file_id is None:
        return []
    # Newlines only: str.splitlines would also split a JSON string at U+2028, U+0085 and the like
    # (the tiny chat model's answers have them, and JSON leaves them unescaped).
    return [json.loads(line) for line in client.files.content(file_id).text.split("\n") if line]


def results_by_custom_id(client: openai.OpenAI, batch) -> tuple[dict, dict]:
    """(output lines, error lines) keyed by custom_id; asserts none appears twice."""
    output, errors = read_lines(client, batch.output_file_id), read_lines(client, batch.error_file_id)
    ids = [line["custom_id"] for line in output + errors]
    assert len(ids) == len(set(ids)), "a custom_id appears more than once"
    return {rec["custom_id"]: rec for rec in output}, {rec["custom_id"]: rec for rec in errors}
