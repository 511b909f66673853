"""Batches API parameters, errors, listing and cancel rules (server without engines: every
batch there fails validation with model_not_found, which is enough for these rules)."""

from __future__ import annotations

import httpx
import openai
import pytest

from tests.support.batches import TERMINAL, chat_line, create, upload, wait_for

BATCH_KEYS = {
    "id",
    "object",
    "endpoint",
    "model",
    "errors",
    "input_file_id",
    "completion_window",
    "status",
    "output_file_id",
    "error_file_id",
    "created_at",
    "in_progress_at",
    "expires_at",
    "finalizing_at",
    "completed_at",
    "failed_at",
    "expired_at",
    "cancelling_at",
    "cancelled_at",
    "request_counts",
    "usage",
    "metadata",
}


def test_create_returns_a_validating_batch_with_every_key(client, server):
    file = upload(client, [chat_line("a")])
    raw = server.http.post(
        f"{server.base_url}/batches",
        headers={"Authorization": "Bearer key-a"},
        json={
            "input_file_id": file.id,
            "endpoint": "/v1/chat/completions",
            "completion_window": "24h",
            "metadata": {"team": "x"},
            "unknown_litellm_field": 1,
        },
    )
    assert raw.status_code == 200
    body = raw.json()
    assert set(body) == BATCH_KEYS
    assert body["object"] == "batch" and body["status"] == "validating"
    assert body["id"].startswith("batch_")
    assert body["expires_at"] - body["created_at"] == 24 * 3600
    assert body["request_counts"] == {"total": 0, "completed": 0, "failed": 0}
    assert body["usage"] == {
        "input_tokens": 0,
        "input_tokens_details": {"cached_tokens": 0},
        "output_tokens": 0,
        "output_tokens_details": {"reasoning_tokens": 0},
        "total_tokens": 0,
    }
    assert body["metadata"] == {"team": "x"}
    assert body["errors"] is None and body["output_file_id"] is None
    assert raw.headers["x-request-id"].startswith("req_")

    strict = server.client("key-a", _strict_response_validation=True)
    assert strict.batches.retrieve(body["id"]).id == body["id"]


def test_parameter_errors_are_synchronous_400s(client):
    file = upload(client, [chat_line("a")])
    cases = [
        (
            {"endpoint": "/v1/chat/completions", "completion_window": "24h"},
            "input_file_id",
            "missing_required_parameter",
            "Missing required parameter: 'input_file_id'.",
        ),
        ({"input_file_id": file.id, "completion_window": "24h"}, "endpoint", "missing_required_parameter", None),
        (
            {"input_file_id": file.id, "endpoint": "/v1/chat/completions"},
            "completion_window",
            "missing_required_parameter",
            None,
        ),
        (
            {"input_file_id": file.id, "endpoint": "/v1/moderations", "completion_window": "24h"},
            "endpoint",
            "invalid_value",
            None,
        ),
        # Messages lines run only in Anthropic's Message Batches (/v1/messages/batches).
        (
            {"input_file_id": file.id, "endpoint": "/v1/messages", "completion_window": "24h"},
            "endpoint",
            "invalid_value",
            None,
        ),
        (
            {"input_file_id": file.id, "endpoint": "/v1/chat/completions", "completion_window": "48h"},
            "completion_window",
            "invalid_value",
            None,
        ),
        (
            {
                "input_file_id": file.id,
                "endpoint": "/v1/chat/completions",
                "completion_window": "24h",
                "metadata": {f"k{i}": "v" for i in range(17)},
            },
            "metadata",
            "object_above_max_properties",
            None,
        ),
        (
            {
                "input_file_id": file.id,
                "endpoint": "/v1/chat/completions",
                "completion_window": "24h",
                "metadata": {"k": "v" * 513},
            },
            "metadata.k",
            "string_above_max_length",
            None,
        ),
        (
            {
                "input_file_id": file.id,
                "endpoint": "/v1/chat/completions",
                "completion_window": "24h",
                "output_expires_after": {"anchor": "created_at", "seconds": 10},
            },
            "output_expires_after.seconds",
            "invalid_value",
            None,
        ),
    ]
    for body, param, code, message in cases:
        with pytest.raises(openai.BadRequestError) as info:
            client.post("/batches", body=body, cast_to=httpx.Response)
        assert (info.value.param, info.value.code) == (param, code), body
        if message:
            assert info.value.body["message"] == message

    with pytest.raises(openai.NotFoundError) as info:
        client.batches.create(input_file_id="file-nope", endpoint="/v1/chat/completions", completion_window="24h")
    assert info.value.body["message"] == "No such File object: file-nope"

    not_batch = client.files.create(file=("x.jsonl", b"{}\n"), purpose="user_data")
    with pytest.raises(openai.BadRequestError) as info:
        client.batches.create(input_file_id=not_batch.id, endpoint="/v1/chat/completions", completion_window="24h")
    assert info.value.param == "input_file_id"

    with pytest.raises(openai.BadRequestError):
        client.post("/batches", body=None, cast_to=httpx.Response)


def test_azure_style_endpoint_is_accepted(client):
    batch = create(client, [chat_line("a")], endpoint="/chat/completions")
    assert batch.endpoint == "/v1/chat/completions"


def test_unknown_and_foreign_batches_are_404(client, client_b):
    with pytest.raises(openai.NotFoundError) as info:
        client.batches.retrieve("batch_nope")
    assert info.value.code == "batch_not_found"
    with pytest.raises(openai.NotFoundError):
        client.batches.cancel("batch_nope")
    mine = create(client, [chat_line("a")])
    with pytest.raises(openai.NotFoundError):
        client_b.batches.retrieve(mine.id)
    with pytest.raises(openai.NotFoundError):
        client_b.batches.cancel(mine.id)
    assert mine.id not in [b.id for b in client_b.batches.list()]


def test_list_is_newest_first_and_paginates(server):
    lister = server.client("key-batch-list")
    file = upload(lister, [chat_line("a")])
    ids = [
        lister.batches.create(input_file_id=file.id, endpoint="/v1/chat/completions", completion_window="24h").id
        for _ in range(7)
    ]
    assert [b.id for b in lister.batches.list(limit=3)] == ids[::-1]
    page = lister.batches.list(limit=3)
    assert len(page.data) == 3 and page.has_more
    last = lister.batches.list(limit=3, after=ids[2])
    assert [b.id for b in last.data] == ids[1::-1] and last.has_more is False
    with pytest.raises(openai.BadRequestError) as info:
        lister.batches.list(limit=101)
    assert info.value.body["message"] == (
        "Invalid 'limit': integer above maximum value. Expected a value <= 100, but got 101 instead."
    )
    with pytest.raises(openai.BadRequestError):
        lister.batches.list(limit=0)


def test_cancel_rules(client):
    batch = create(client, [chat_line("a")])
    failed = wait_for(client, batch.id, TERMINAL, timeout=30)
    assert failed.status == "failed"  # no models on this server
    assert failed.errors.data[0].code == "model_not_found"
    with pytest.raises(openai.ConflictError) as info:
        client.batches.cancel(batch.id)
    assert info.value.body["message"] == "Cannot cancel a batch with status 'failed'."
