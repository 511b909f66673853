"""`DELETE /v1/batches/{batch_id}` (batchd's, beside OpenAI's API), called as a user does with
the official client's raw `delete`: an ended batch goes from retrieve and list (its id still a
list cursor), its files stay unless `files=true`; a batch not ended is a 409."""

from __future__ import annotations

import openai
import pytest

from harness.poll import wait_until
from tests.support import db
from tests.support.batches import TERMINAL, chat_line, create, upload, wait_for


def _delete(client: openai.OpenAI, batch_id: str, **query) -> dict:
    return client.delete(f"/batches/{batch_id}", cast_to=dict, options={"params": query})


def _ended(client: openai.OpenAI, **kw):
    batch = create(client, [chat_line("1")], **kw)
    return wait_for(client, batch.id, TERMINAL, timeout=30)


def test_delete_an_ended_batch_keeps_its_files(client, server):
    kept = _ended(client)
    batch = _ended(client)
    assert batch.status == "failed"
    file_ids = _with_result_files(client, server, batch)
    assert _delete(client, batch.id) == {"id": batch.id, "object": "batch.deleted", "deleted": True}
    with pytest.raises(openai.NotFoundError) as info:
        client.batches.retrieve(batch.id)
    assert info.value.code == "batch_not_found"
    listed = [b.id for b in client.batches.list()]
    assert batch.id not in listed and kept.id in listed
    assert [client.files.retrieve(file_id).id for file_id in file_ids] == file_ids
    for again in (lambda: _delete(client, batch.id), lambda: client.batches.cancel(batch.id)):
        with pytest.raises(openai.NotFoundError):
            again()
    # Its id still keeps a client's place in the list (as a deleted file's does).
    older = client.batches.list(after=batch.id, limit=100)
    assert kept.id in [b.id for b in older.data]


def _with_result_files(client: openai.OpenAI, server, batch) -> list[str]:
    """Give an ended batch an output and an error file (this server runs no model to write them)."""
    output, error = (client.files.create(file=(n, b"{}\n"), purpose="user_data").id for n in ("o.jsonl", "e.jsonl"))
    db.execute(
        server,
        "UPDATE batches SET output_file_id = :o, error_file_id = :e WHERE id = :id",
        o=output,
        e=error,
        id=batch.id,
    )
    return [batch.input_file_id, output, error]


def test_delete_with_files_deletes_them_as_files_delete_does(client, server):
    batch = _ended(client)
    file_ids = _with_result_files(client, server, batch)
    assert all(db.has_blob(server, "proj-a", file_id) for file_id in file_ids)
    assert _delete(client, batch.id, files="true")["deleted"] is True
    for file_id in file_ids:
        with pytest.raises(openai.NotFoundError):
            client.files.retrieve(file_id)
        assert not db.has_blob(server, "proj-a", file_id)
    with pytest.raises(openai.NotFoundError):
        client.batches.retrieve(batch.id)


def test_delete_with_files_refuses_an_input_another_running_batch_reads(client, server):
    file = upload(client, [chat_line("1")])
    ended, running = (
        client.batches.create(input_file_id=file.id, endpoint="/v1/chat/completions", completion_window="24h")
        for _ in range(2)
    )
    wait_for(client, ended.id, TERMINAL, timeout=30)
    db.hold_elsewhere(server, running.id)
    with pytest.raises(openai.ConflictError) as info:
        _delete(client, ended.id, files="true")
    assert running.id in info.value.body["message"]
    # All or nothing: the batch and its file are both still there.
    assert client.batches.retrieve(ended.id).id == ended.id
    assert client.files.retrieve(file.id).id == file.id


def test_a_batch_not_ended_is_409_and_unknown_or_foreign_is_404(client, client_b, server):
    batch = create(client, [chat_line("1")])
    db.hold_elsewhere(server, batch.id)
    with pytest.raises(openai.ConflictError) as info:
        _delete(client, batch.id)
    assert info.value.status_code == 409 and info.value.body["type"] == "invalid_request_error"
    assert "in_progress" in info.value.body["message"]
    assert client.batches.retrieve(batch.id).status == "in_progress"
    with pytest.raises(openai.NotFoundError) as missing:
        _delete(client, "batch_nope")
    assert missing.value.code == "batch_not_found"
    ended = _ended(client)
    with pytest.raises(openai.NotFoundError):
        _delete(client_b, ended.id)
    assert client.batches.retrieve(ended.id).id == ended.id


def test_curl_style_delete_and_bad_files_flag(client, server):
    batch = _ended(client)
    headers = {"Authorization": "Bearer key-a"}
    bad = server.http.delete(f"{server.base_url}/batches/{batch.id}", params={"files": "maybe"}, headers=headers)
    assert bad.status_code == 400 and bad.json()["error"]["param"] == "files"
    ok = server.http.delete(f"{server.base_url}/batches/{batch.id}", headers=headers)
    assert ok.status_code == 200 and ok.json() == {"id": batch.id, "object": "batch.deleted", "deleted": True}


def test_a_deleted_tombstone_is_purged_with_its_shards(start_app):
    """Past the grace period the sweeper forgets the row; its shard rows go with it (CASCADE)."""
    server = start_app({"BATCHD_API_KEYS": "key-p=proj-p", "BATCHD_SWEEP_INTERVAL": "0.2"})
    client = server.client("key-p")
    batch = _ended(client)
    db.execute(
        server,
        "INSERT INTO batch_shards (batch_id, shard_no, first_line, end_line, start_offset, lines, status, fence, "
        "taken_over, lines_done) VALUES (:id, 0, 0, 1, 0, 1, 'done', 0, 0, 1)",
        id=batch.id,
    )
    _delete(client, batch.id)
    # The grace period is a week; as if it were deleted eight days ago.
    db.execute(server, "UPDATE batches SET deleted_at = deleted_at - 8 * 86400 WHERE id = :id", id=batch.id)
    wait_until(
        lambda: db.execute(server, "SELECT count(*) FROM batches WHERE id = :id", id=batch.id)[0][0] == 0,
        timeout=20,
        what="the tombstone's purge",
    )
    assert db.execute(server, "SELECT count(*) FROM batch_shards WHERE batch_id = :id", id=batch.id)[0][0] == 0
    with pytest.raises(openai.NotFoundError):
        client.batches.list(after=batch.id)
