"""Requests Schemathesis found mishandled (tests/e2e/test_schemathesis.py), kept as plain tests."""

from __future__ import annotations

import json

import httpx
import pytest

from harness.poll import wait_until

AUTH = {"Authorization": "Bearer key-a"}


def _root(server) -> str:
    return server.base_url.removesuffix("/v1")


def _assert_envelope(response: httpx.Response, status: int) -> dict:
    assert response.status_code == status, response.text
    error = response.json()["error"]
    assert set(error) == {"message", "type", "param", "code"}
    return error


def test_completion_window_of_the_wrong_type_is_400_not_500(server):
    for window in ({}, [], ["24h"], 24):
        response = server.http.post(
            f"{server.base_url}/batches",
            headers=AUTH,
            json={"input_file_id": "0", "endpoint": "/v1/chat/completions", "completion_window": window},
        )
        error = _assert_envelope(response, 400)
        assert error["param"] == "completion_window" and error["code"] == "invalid_value"


@pytest.mark.parametrize(
    ("method", "path", "allowed"),
    [
        ("OPTIONS", "/v1/files", "GET, POST"),
        ("PUT", "/v1/batches", "GET, POST"),
        ("PATCH", "/v1/files/file-x", "DELETE, GET"),
        ("TRACE", "/health", "GET"),
    ],
)
def test_405_lists_every_method_of_the_path_in_allow(server, method, path, allowed):
    response = server.http.request(method, _root(server) + path, headers=AUTH)
    _assert_envelope(response, 405)
    assert response.headers["allow"] == allowed


def test_integral_float_seconds_are_integers(server):
    """JSON Schema's `integer` includes 3600.0; the expiry fields accept it."""
    created = server.http.post(
        f"{server.base_url}/files",
        headers=AUTH,
        files={"file": ("a.jsonl", b"{}\n")},
        data={"purpose": "batch", "expires_after[anchor]": "created_at", "expires_after[seconds]": "3600.0"},
    )
    assert created.status_code == 200, created.text
    assert created.json()["expires_at"] - created.json()["created_at"] == 3600
    half = server.http.post(
        f"{server.base_url}/files",
        headers=AUTH,
        files={"file": ("a.jsonl", b"{}\n")},
        data={"purpose": "batch", "expires_after[anchor]": "created_at", "expires_after[seconds]": "3600.5"},
    )
    assert _assert_envelope(half, 400)["param"] == "expires_after.seconds"
    batch = server.http.post(
        f"{server.base_url}/batches",
        headers=AUTH,
        json={
            "input_file_id": created.json()["id"],
            "endpoint": "/v1/chat/completions",
            "completion_window": "24h",
            "output_expires_after": {"anchor": "created_at", "seconds": 7200.0},
        },
    )
    assert batch.status_code == 200, batch.text


def test_a_receiver_host_that_is_no_dns_name_is_400_not_500(server):
    """A label over 63 characters made the resolver raise UnicodeError."""
    response = server.http.post(
        f"{server.base_url}/webhook_endpoints",
        headers=AUTH,
        json={"url": "https://" + "0" * 64 + ".com/hook", "name": "n", "event_types": ["batch.completed"]},
    )
    assert _assert_envelope(response, 400)["param"] == "url"


def test_md5_null_is_the_same_as_leaving_it_out(server):
    created = server.http.post(
        f"{server.base_url}/uploads",
        headers=AUTH,
        json={"bytes": 0, "filename": "empty.txt", "mime_type": "text/plain", "purpose": "user_data"},
    ).json()
    done = server.http.post(
        f"{server.base_url}/uploads/{created['id']}/complete", headers=AUTH, json={"part_ids": [], "md5": None}
    )
    assert done.status_code == 200, done.text
    assert done.json()["status"] == "completed"


def test_message_batch_results_whose_file_was_deleted_are_404_not_a_cut_stream(server):
    """The stateful phase deleted a Message Batch's file through the Files API, then read its
    results: the stream started, then broke off when the file was not there."""
    headers = {"x-api-key": "key-a"}
    params = {"model": "no-such-model", "max_tokens": 4, "messages": [{"role": "user", "content": "hi"}]}
    created = server.http.post(
        f"{_root(server)}/v1/messages/batches",
        headers=headers,
        json={"requests": [{"custom_id": "a", "params": params}]},
    )
    assert created.status_code == 200, created.text
    batch_id = created.json()["id"]
    url = f"{_root(server)}/v1/messages/batches/{batch_id}"
    wait_until(
        lambda: server.http.get(url, headers=headers).json()["processing_status"] == "ended", 60, "the batch to end"
    )
    before = server.http.get(f"{url}/results", headers=headers)
    assert [line["custom_id"] for line in map(json.loads, before.text.splitlines())] == ["a"]

    for file in server.http.get(f"{server.base_url}/files", headers=AUTH, params={"limit": 10000}).json()["data"]:
        if file["filename"].startswith(batch_id) or file["id"] in before.text:
            assert server.http.delete(f"{server.base_url}/files/{file['id']}", headers=AUTH).status_code == 200
    after = server.http.get(f"{url}/results", headers=headers)
    assert after.status_code == 404, after.text
    assert (
        after.json()["error"]["type"] == "not_found_error" and "no longer available" in after.json()["error"]["message"]
    )


@pytest.mark.parametrize("custom_id", ["a\n", "ok_1\n"])
def test_a_custom_id_the_documented_pattern_refuses_is_refused(server, custom_id):
    # Python's `$` also matches before a final newline, so the service's own check let these
    # through while the document's pattern (the body model's) refuses them; the model now decides.
    params = {"model": "m", "max_tokens": 4, "messages": [{"role": "user", "content": "hi"}]}
    response = server.http.post(
        f"{_root(server)}/v1/messages/batches",
        headers={"x-api-key": "key-a"},
        json={"requests": [{"custom_id": custom_id, "params": params}]},
    )
    assert response.status_code == 400, response.text
    body = response.json()
    assert body["type"] == "error" and body["error"]["type"] == "invalid_request_error"
    assert "requests.0.custom_id" in body["error"]["message"]


@pytest.mark.parametrize(
    ("query", "param"),
    [({"metadata[a\x00b]": "x"}, "metadata"), ({"metadata[a]": "x\x00"}, "metadata"), ({"model": "m\x00"}, "model")],
)
def test_a_nul_byte_in_a_batch_list_filter_is_400_not_500(server, query, param):
    """Postgres stores no NUL byte in text: the filter was handed to it and failed as a 500."""
    response = server.http.get(f"{server.base_url}/batches", headers=AUTH, params=query)
    assert _assert_envelope(response, 400)["param"] == param
