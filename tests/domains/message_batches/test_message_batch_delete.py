"""`DELETE /v1/messages/batches/{id}` with Anthropic's client: the Message Batch becomes a
tombstone as a deleted OpenAI batch does (gone from retrieve and both lists, its id still a
cursor), and its input and result files go with it. This server runs no model, so each request
ends `errored` at once."""

from __future__ import annotations

import openai
import pytest

from harness.poll import wait_until
from tests.support import db
from tests.support.lazy import anthropic

KEY = "key-msgbatch"


def _ended(client: anthropic.Anthropic, custom_id: str):
    params = {"model": "batchd-tiny-chat", "max_tokens": 4, "messages": [{"role": "user", "content": "hi"}]}
    batch = client.messages.batches.create(requests=[{"custom_id": custom_id, "params": params}])
    return wait_until(
        lambda: (b := client.messages.batches.retrieve(batch.id)).processing_status == "ended" and b,
        timeout=30,
        what=f"message batch {batch.id} to end",
        interval=0.2,
    )


def test_a_deleted_message_batch_is_a_tombstone_whose_id_keeps_its_place(server):
    client = server.anthropic(KEY)
    older, deleted, newer = (_ended(client, f"r{i}") for i in range(3))
    files = db.execute(server, "SELECT input_file_id, error_file_id FROM batches WHERE id = :id", id=deleted.id)[0]
    assert all(files)

    gone = client.messages.batches.delete(deleted.id)
    assert (gone.id, gone.type) == (deleted.id, "message_batch_deleted")
    with pytest.raises(anthropic.NotFoundError):
        client.messages.batches.retrieve(deleted.id)
    with pytest.raises(anthropic.NotFoundError):
        client.messages.batches.delete(deleted.id)
    assert deleted.id not in [b.id for b in client.messages.batches.list(limit=100)]
    # Its id is still a cursor both ways, and in OpenAI's list too.
    assert older.id in [b.id for b in client.messages.batches.list(after_id=deleted.id, limit=100)]
    assert [b.id for b in client.messages.batches.list(before_id=deleted.id, limit=100)][-1] == newer.id
    batches = server.client(KEY).batches
    assert older.id in [b.id for b in batches.list(after=deleted.id, limit=100)]
    ((deleted_at,),) = db.execute(server, "SELECT deleted_at FROM batches WHERE id = :id", id=deleted.id)
    assert deleted_at is not None
    for file_id in files:
        with pytest.raises(openai.NotFoundError):
            server.client(KEY).files.retrieve(file_id)
        assert not db.has_blob(server, "proj-msgbatch", file_id)
