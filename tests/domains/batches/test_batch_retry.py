"""`POST /v1/batches/{batch_id}/retry` (batchd's, beside OpenAI's API), called with the official
client's raw `post`. This server runs no model, so a batch that ran is made by hand: an ended
batch is given an output and an error file as finalize writes them."""

from __future__ import annotations

import json

import openai
import pytest

from tests.support import db
from tests.support.batches import TERMINAL, chat_line, create, jsonl, wait_for


def _retry(client: openai.OpenAI, batch_id: str, body: dict | None = None) -> dict:
    return client.post(f"/batches/{batch_id}/retry", body=body, cast_to=dict)


def _error_line(custom_id: str, code: str, *, http: bool = False) -> dict:
    if http:
        error = {"message": "bad", "type": "BadRequestError", "param": None, "code": code}
        response = {"status_code": 400, "request_id": "r", "body": {"error": error}}
        return {"id": "x", "custom_id": custom_id, "response": response, "error": None}
    return {"id": "x", "custom_id": custom_id, "response": None, "error": {"code": code, "message": "m"}}


LINES = [chat_line(c, text=f"line {c}") for c in ("a", "b", "c", "d")]


def _ran(client: openai.OpenAI, server, errors: list[dict] | None):
    """An ended batch that ran: line a succeeded, `errors` are its error file's lines."""
    batch = wait_for(client, create(client, LINES, metadata={"team": "t"}).id, TERMINAL, timeout=30)
    output = client.files.create(file=("o.jsonl", jsonl([{"custom_id": "a"}])), purpose="user_data").id
    error = client.files.create(file=("e.jsonl", jsonl(errors)), purpose="user_data").id if errors else None
    db.execute(
        server,
        "UPDATE batches SET status = 'completed', in_progress_at = created_at, errors = NULL, "
        "output_file_id = :o, error_file_id = :e WHERE id = :id",
        o=output,
        e=error,
        id=batch.id,
    )
    return batch


def _input_lines(client: openai.OpenAI, batch: dict) -> list[dict]:
    return [json.loads(line) for line in client.files.content(batch["input_file_id"]).text.splitlines()]


def test_retry_runs_exactly_the_lines_that_did_not_succeed(client, server):
    errors = [_error_line("b", "invalid_value", http=True), _error_line("c", "batch_expired")]
    errors.append(_error_line("d", "request_timeout"))
    original = _ran(client, server, errors)
    again = _retry(client, original.id)
    assert again["id"] != original.id and again["retry_of"] == original.id
    assert (again["endpoint"], again["completion_window"], again["metadata"]) == (
        "/v1/chat/completions",
        "24h",
        {"team": "t"},
    )
    assert again["input_file_id"] != original.input_file_id
    assert _input_lines(client, again) == LINES[1:]  # b, c, d, as the input had them
    assert client.files.retrieve(again["input_file_id"]).purpose == "batch"
    retrieved = server.http.get(f"{server.base_url}/batches/{again['id']}", headers={"Authorization": "Bearer key-a"})
    assert retrieved.json()["retry_of"] == original.id
    # The original is untouched, and carries no retry_of key (OpenAI's object exactly).
    plain = server.http.get(
        f"{server.base_url}/batches/{original.id}", headers={"Authorization": "Bearer key-a"}
    ).json()
    assert "retry_of" not in plain and plain["status"] == "completed"
    only = _retry(client, original.id, {"errors": ["batch_expired", "invalid_value"]})
    assert [line["custom_id"] for line in _input_lines(client, only)] == ["b", "c"]
    with pytest.raises(openai.BadRequestError) as info:
        _retry(client, original.id, {"errors": ["rate_limit_exceeded"]})
    assert info.value.code == "nothing_to_retry"


def test_a_batch_that_never_ran_retries_every_line(client):
    failed = wait_for(client, create(client, LINES).id, TERMINAL, timeout=30)
    assert failed.status == "failed" and failed.errors.data[0].code == "model_not_found"
    assert _input_lines(client, _retry(client, failed.id)) == LINES
    by_code = _retry(client, failed.id, {"errors": ["model_not_found"]})
    assert _input_lines(client, by_code) == LINES and by_code["retry_of"] == failed.id
    with pytest.raises(openai.BadRequestError) as info:
        _retry(client, failed.id, {"errors": ["batch_expired"]})
    assert info.value.code == "nothing_to_retry"


def test_nothing_to_retry_running_unknown_and_bad_bodies(client, client_b, server):
    all_good = _ran(client, server, None)
    with pytest.raises(openai.BadRequestError) as info:
        _retry(client, all_good.id)
    assert info.value.code == "nothing_to_retry"
    running = create(client, LINES)
    db.hold_elsewhere(server, running.id)
    with pytest.raises(openai.ConflictError):
        _retry(client, running.id)
    with pytest.raises(openai.NotFoundError):
        _retry(client, "batch_nope")
    with pytest.raises(openai.NotFoundError):
        _retry(client_b, all_good.id)
    for body in ({"errors": []}, {"errors": "batch_expired"}, {"errors": [""]}):
        with pytest.raises(openai.BadRequestError) as bad:
            _retry(client, all_good.id, body)
        assert bad.value.param is not None and bad.value.param.startswith("errors"), body


def test_retry_refuses_a_batch_whose_input_file_was_deleted(client):
    failed = wait_for(client, create(client, LINES).id, TERMINAL, timeout=30)
    client.files.delete(failed.input_file_id)
    with pytest.raises(openai.BadRequestError) as info:
        _retry(client, failed.id)
    assert info.value.code == "file_deleted"
