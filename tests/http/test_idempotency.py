"""`Idempotency-Key` on POSTs, through the official client (`extra_headers`): a repeat returns
the first response and makes nothing new; the same key with another request is a 409; keys are
per API key; an error is not kept; a key is forgotten after `idempotency_key_hours`. The callers,
secrets, storage and lease rules: tests/http/test_idempotency_callers.py."""

from __future__ import annotations

import threading

import openai
import pytest

from tests.support import db
from tests.support.batches import chat_line, jsonl

LINES = jsonl([chat_line("a"), chat_line("b")])


def _key(name: str) -> dict[str, str]:
    return {"Idempotency-Key": name}


def _upload(client: openai.OpenAI, key: str, data: bytes = LINES, name: str = "input.jsonl"):
    return client.files.with_raw_response.create(file=(name, data), purpose="batch", extra_headers=_key(key))


def _file_ids(client: openai.OpenAI) -> set[str]:
    return {f.id for f in client.files.list(limit=100).data}


def test_a_repeated_upload_returns_the_first_file_and_stores_one(client, request):
    key = request.node.name
    before = _file_ids(client)
    first = _upload(client, key)
    again = _upload(client, key)  # the client draws a new multipart boundary: still the same request
    assert (first.status_code, again.status_code) == (200, 200)
    assert again.parse().model_dump() == first.parse().model_dump()
    assert "idempotent-replayed" not in first.headers and again.headers["idempotent-replayed"] == "true"
    assert _file_ids(client) - before == {first.parse().id}


def test_a_repeated_batch_create_returns_the_first_batch(client, server, request):
    key = request.node.name
    file = client.files.create(file=("input.jsonl", LINES), purpose="batch")
    first = client.batches.create(
        input_file_id=file.id,
        endpoint="/v1/chat/completions",
        completion_window="24h",
        metadata={"run": "1"},
        extra_headers=_key(key),
    )
    # The same request with its keys in another order and other spacing: a JSON body is compared by value.
    body = (
        f'{{ "metadata": {{"run": "1"}}, "completion_window": "24h",\n'
        f'  "endpoint": "/v1/chat/completions", "input_file_id": "{file.id}" }}'
    )
    again = server.http.post(
        "/v1/batches",
        content=body,
        headers={**_key(key), "Authorization": "Bearer key-a", "Content-Type": "application/json"},
    )
    assert again.status_code == 200 and again.headers["idempotent-replayed"] == "true"
    assert again.json() == first.model_dump(mode="json")
    assert [b.id for b in client.batches.list(limit=100).data if b.input_file_id == file.id] == [first.id]


def test_the_same_key_with_another_request_is_a_409(client, request):
    key = request.node.name
    _upload(client, key)
    with pytest.raises(openai.ConflictError) as changed:
        _upload(client, key, data=jsonl([chat_line("other")]))
    assert changed.value.body == {
        "message": f"Idempotency-Key '{key}' was already used with a different request; "
        "use a new key for a new request.",
        "type": "invalid_request_error",
        "param": "idempotency-key",
        "code": "idempotency_key_reused",
    }
    with pytest.raises(openai.ConflictError):  # another route with the same key is another request
        client.batches.create(
            input_file_id="file-x", endpoint="/v1/chat/completions", completion_window="24h", extra_headers=_key(key)
        )


def test_keys_are_per_project(client, client_b, request):
    key = request.node.name
    mine, theirs = _upload(client, key).parse(), _upload(client_b, key).parse()
    assert mine.id != theirs.id
    assert client_b.files.retrieve(theirs.id).id == theirs.id
    with pytest.raises(openai.NotFoundError):
        client_b.files.retrieve(mine.id)


def test_an_error_is_not_kept_and_the_retry_runs(client, request):
    key = request.node.name
    create = {"endpoint": "/v1/chat/completions", "completion_window": "24h", "extra_headers": _key(key)}
    with pytest.raises(openai.NotFoundError):
        client.batches.create(input_file_id="file-missing", **create)
    with pytest.raises(openai.NotFoundError):  # not a replay: the request ran again and failed again
        client.batches.create(input_file_id="file-missing", **create)
    file = client.files.create(file=("input.jsonl", LINES), purpose="batch")
    assert client.batches.create(input_file_id=file.id, **create).input_file_id == file.id


def test_concurrent_duplicates_make_one_object(client, request):
    key = request.node.name
    before = _file_ids(client)
    results: list[str] = []

    def send() -> None:
        results.append(_upload(client, key).parse().id)

    threads = [threading.Thread(target=send) for _ in range(4)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(timeout=60)
    assert len(results) == 4 and len(set(results)) == 1, results
    assert _file_ids(client) - before == set(results)


def test_a_key_past_its_hours_is_new_again(client, server, request):
    key = request.node.name
    first = _upload(client, key).parse()
    db.execute(server, "UPDATE idempotency_keys SET created_at = created_at - 86401 WHERE key = :key", key=key)
    again = _upload(client, key).parse()
    assert again.id != first.id


@pytest.mark.parametrize("key", ["", "x" * 256, "a\tb"])
def test_a_malformed_key_is_a_400(client, key):
    with pytest.raises(openai.BadRequestError) as refused:
        client.files.create(
            file=("input.jsonl", LINES),
            purpose="batch",
            extra_headers={"Idempotency-Key": key},
        )
    assert refused.value.body["param"] == "idempotency-key"


def test_other_creates_take_a_key_too(client, hooks_client, receiver, request):
    """An Uploads API upload and a webhook endpoint: every POST goes through the same door."""
    key = request.node.name
    upload = {"bytes": 10, "filename": "a.jsonl", "mime_type": "text/jsonl", "purpose": "batch"}
    first = client.uploads.create(**upload, extra_headers=_key(key))
    assert client.uploads.create(**upload, extra_headers=_key(key)).id == first.id
    made = [
        hooks_client.webhooks.create(
            url=receiver.url, name="ops", event_types=["batch.completed"], extra_headers=_key(key)
        )
        for _ in range(2)
    ]
    # The repeat is the endpoint as a retrieve shows it: the signing secret is never kept.
    assert made[0].id == made[1].id and made[0].signing_secret and made[1].signing_secret is None
    assert made[1].signing_secret_hint == made[0].signing_secret_hint
    assert [e.id for e in hooks_client.webhooks.list().data] == [made[0].id]
