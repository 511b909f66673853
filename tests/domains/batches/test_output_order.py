"""`output_order: "input"` (batchd's, in the create body through the official client's
`extra_body`): a chat batch of several shards whose lines share prompt prefixes, which by default
runs (and lists its files) in prefix order, lists its output and error files in input order; the
batch object echoes the field, and a batch without it is exactly OpenAI's object."""

from __future__ import annotations

import json

import pytest

from tests.conftest import API_KEYS_ENV
from tests.support.app_server import AppServer
from tests.support.batches import CHAT_MODEL, create, wait_for
from tests.support.fake_engine import FakeEngines

LINES = 60
FAIL_EVERY = 7  # these lines are answered 400: error-file lines


@pytest.fixture(scope="module")
def shards_server(start_app) -> AppServer:
    """The fake engine with 10-line shards: a 60-line batch is six shards."""
    return start_app({"BATCHD_API_KEYS": API_KEYS_ENV, "BATCHD_SHARD_LINES": "10"}, engines=FakeEngines())


def _lines(tag: str) -> list[dict]:
    """Lines alternating between two documents: prefix order groups each document's lines."""
    lines = []
    for i in range(LINES):
        document = ("Document A. " if i % 2 else "Document B. ") * 20
        question = f"fake:400 q{i}" if i % FAIL_EVERY == 0 else f"question {i}"
        lines.append(
            {
                "custom_id": f"{tag}-{i}",
                "method": "POST",
                "url": "/v1/chat/completions",
                "body": {
                    "model": CHAT_MODEL,
                    "messages": [{"role": "system", "content": document}, {"role": "user", "content": question}],
                    "max_tokens": 4,
                },
            }
        )
    return lines


def _ids(client, file_id: str) -> list[str]:
    return [json.loads(line)["custom_id"] for line in client.files.content(file_id).text.splitlines()]


def _ended(client, tag: str, **kw):
    batch = create(client, _lines(tag), **kw)
    done = wait_for(client, batch.id, timeout=60)
    assert done.status == "completed", done
    return batch, done


def test_input_order_lists_both_files_in_input_order(shards_server):
    client = shards_server.client("key-a")
    batch, done = _ended(client, "in", extra_body={"output_order": "input"})
    assert batch.model_extra["output_order"] == "input"  # echoed on create and on retrieve
    assert client.batches.retrieve(batch.id).model_extra["output_order"] == "input"
    failing = {i for i in range(LINES) if i % FAIL_EVERY == 0}
    assert done.request_counts.failed == len(failing)
    assert _ids(client, done.output_file_id) == [f"in-{i}" for i in range(LINES) if i not in failing]
    assert _ids(client, done.error_file_id) == [f"in-{i}" for i in sorted(failing)]


def test_the_default_is_completion_order_and_openai_s_object(shards_server):
    """The control: without the field, the same lines come back in prefix order (so the test
    above can fail), and the batch object has no `output_order` key."""
    client = shards_server.client("key-a")
    batch, done = _ended(client, "co")
    assert "output_order" not in batch.model_dump() and "output_order" not in (done.model_extra or {})
    output = _ids(client, done.output_file_id)
    assert sorted(output, key=lambda i: int(i.split("-")[1])) != output


def test_an_unknown_output_order_is_a_400(shards_server):
    import openai

    client = shards_server.client("key-a")
    with pytest.raises(openai.BadRequestError) as raised:
        create(client, _lines("bad"), extra_body={"output_order": "random"})
    assert raised.value.body["param"] == "output_order"
