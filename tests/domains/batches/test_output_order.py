"""`output_order: "input"` (batchd's, in the create body through the official client's
`extra_body`): a chat batch of several shards whose lines share prompt prefixes, which by default
runs (and lists its files) in prefix order, lists its output and error files in input order; it
still runs in prefix order (its shards are cut from the prefix-ordered copy), a cancelled one's
lines that never ran get their error lines in their input place too; the batch object echoes the
field, and a batch without it is exactly OpenAI's object."""

from __future__ import annotations

import json

import numpy as np
import pytest
from sqlalchemy import select

from app.api.runtime import Runtime
from app.db.models import Batch
from app.db.repositories.shards import ShardRepository
from app.pipeline.input_order import positions_id
from tests.conftest import API_KEYS_ENV
from tests.support import db
from tests.support.app_server import AppServer
from tests.support.batches import CHAT_MODEL, cancel_in_cleanup, create, read_lines, wait_for
from tests.support.fake_engine import FakeEngines

LINES = 60
FAIL_EVERY = 7  # these lines are answered 400: error-file lines


@pytest.fixture(scope="module")
def shards_server(start_app) -> AppServer:
    """The fake engine with 10-line shards: a 60-line batch is six shards."""
    return start_app({"BATCHD_API_KEYS": API_KEYS_ENV, "BATCHD_SHARD_LINES": "10"}, engines=FakeEngines())


def _lines(tag: str, questions: dict[int, str] | None = None) -> list[dict]:
    """Lines alternating between two documents: prefix order groups each document's lines.
    `questions` replaces some lines' questions (a fake engine rule: fake:hold, fake:stall)."""
    lines = []
    for i in range(LINES):
        document = ("Document A. " if i % 2 else "Document B. ") * 20
        question = f"fake:400 q{i}" if i % FAIL_EVERY == 0 else f"question {i}"
        question = (questions or {}).get(i, question)
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


def _document(custom_id: str) -> str:
    return "A" if int(custom_id.rsplit("-", 1)[1]) % 2 else "B"


async def _running_copy(
    runtime: Runtime, batch_id: str
) -> tuple[str, str, list[str], list[int], list[tuple[int, int]]]:
    """(project, ordered copy id, the copy's custom_ids and positions, the shards' copy lines)."""
    async with runtime.db.read() as session:
        project, ordered = (
            await session.execute(select(Batch.project, Batch.ordered_input).where(Batch.id == batch_id))
        ).one()
        spans = [(span.first_line, span.end_line) for span in await ShardRepository(session).of_batch(batch_id)]
    assert ordered is not None, "no prefix-ordered copy"
    copy = b"".join([chunk async for chunk in runtime.store.read(project, ordered)])
    packed = b"".join([chunk async for chunk in runtime.store.read(project, positions_id(ordered))])
    ids = [json.loads(line)["custom_id"] for line in copy.splitlines()]
    return project, ordered, ids, np.frombuffer(packed, "<u4").tolist(), spans


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


def test_an_input_order_batch_runs_from_the_prefix_ordered_copy(shards_server):
    """While it runs, the batch's shards are cut from the prefix-ordered copy: each shard holds one
    document's lines, and the copy's positions name each copied line's input line; its files are
    still in input order, and the copy and its positions go once it ends."""
    client = shards_server.client("key-a")
    engines = shards_server.engines
    assert isinstance(engines, FakeEngines)
    held = LINES - 1  # one line answers only when released: the batch is seen running
    batch = create(client, _lines("pre", {held: "fake:hold q"}), extra_body={"output_order": "input"})
    try:
        wait_for(client, batch.id, until=lambda b: b.status == "in_progress", timeout=60)
        project, ordered, ids, positions, spans = shards_server.call(_running_copy, shards_server.runtime, batch.id)
        assert ordered == f"ordered-{batch.id}"
        assert sorted(ids, key=lambda i: int(i.split("-")[1])) == [f"pre-{i}" for i in range(LINES)]
        assert ids != [f"pre-{i}" for i in range(LINES)]  # prefix order, not the input's
        assert [f"pre-{at - 1}" for at in positions] == ids  # input line numbers count from 1
        assert len(spans) == LINES // 10
        for first, end in spans:  # each shard one document's lines: its prefix is cached for the next
            assert len({_document(i) for i in ids[first - 1 : end - 1]}) == 1, ids[first - 1 : end - 1]
    finally:
        engines.release()
    try:
        done = wait_for(client, batch.id, timeout=60)
    finally:
        engines.hold()
    assert done.status == "completed", done
    failing = {i for i in range(LINES) if i % FAIL_EVERY == 0}
    assert _ids(client, done.output_file_id) == [f"pre-{i}" for i in range(LINES) if i not in failing]
    assert _ids(client, done.error_file_id) == [f"pre-{i}" for i in sorted(failing)]
    assert not db.has_blob(shards_server, project, ordered)
    assert not db.has_blob(shards_server, project, positions_id(ordered))


def test_a_cancelled_input_order_batch_lists_lines_that_never_ran_in_input_place(shards_server):
    """Lines stalled at cancel (and those not started by then) never ran: their batch_cancelled
    error lines sit among the failed lines' in input order, across the shards, as the finished
    lines do in the output file."""
    client = shards_server.client("key-a")
    stalled = {5, 16, 27, 38, 49}  # both documents: shards of both stall
    batch = create(client, _lines("can", dict.fromkeys(stalled, "fake:stall q")), extra_body={"output_order": "input"})
    try:
        # Some lines ran (stalled shards hold their places, so not every other line need run).
        wait_for(
            client, batch.id, until=lambda b: b.request_counts.completed + b.request_counts.failed >= 20, timeout=60
        )
        client.batches.cancel(batch.id)
    finally:
        ended = cancel_in_cleanup(client, batch.id)
    assert ended.status == "cancelled", ended
    output = _ids(client, ended.output_file_id)
    errors = read_lines(client, ended.error_file_id)
    error_ids = [line["custom_id"] for line in errors]
    in_input_order = [f"can-{i}" for i in range(LINES)]
    assert output == [i for i in in_input_order if i in set(output)]
    assert error_ids == [i for i in in_input_order if i in set(error_ids)]
    assert sorted(output + error_ids) == sorted(in_input_order)
    never_ran = [line["custom_id"] for line in errors if (line["error"] or {}).get("code") == "batch_cancelled"]
    assert {f"can-{i}" for i in stalled} <= set(never_ran)
    [(unexecuted,)] = db.execute(shards_server, "SELECT unexecuted FROM batches WHERE id = :id", id=ended.id)
    assert unexecuted == len(never_ran)
