"""Per-project limits (stored bytes, active batches) as 429s in OpenAI's envelope, JSON bodies
capped with a 413, and file names that cannot split headers or reach the filesystem."""

from __future__ import annotations

import json
from email.message import Message
from pathlib import Path

import httpx
import openai
import pytest

from app.core.config import Settings
from app.domains.organization.projects import NO_LIMIT, set_project
from tests.conftest import API_KEYS_ENV
from tests.support import db


@pytest.fixture(scope="module")
def limited(start_app):
    return start_app(
        {
            "BATCHD_API_KEYS": API_KEYS_ENV,
            "BATCHD_PROJECT_MAX_BYTES": "10000",
            "BATCHD_PROJECT_MAX_ACTIVE_BATCHES": "2",
            "BATCHD_MAX_JSON_BODY_BYTES": "4096",
        }
    )


def _client(server, key: str = "key-a") -> openai.OpenAI:
    return server.client(key, max_retries=2)


def test_stored_bytes_limit_is_429_and_stores_nothing(limited):
    client = _client(limited)
    first = client.files.create(file=("six.bin", b"x" * 6000), purpose="user_data")  # > the JSON cap: fine
    rows, blobs = db.execute(limited, "SELECT count(*) FROM files")[0][0], db.blob_files(limited)
    with pytest.raises(openai.RateLimitError) as info:  # max_retries=2: x-should-retry false, one attempt
        client.files.create(file=("five.jsonl", b"{}\n" * 1700), purpose="batch")
    assert info.value.status_code == 429
    assert info.value.response.headers["x-should-retry"] == "false"
    assert info.value.body["type"] == "insufficient_quota" and info.value.body["code"] == "insufficient_quota"
    assert "limit is 10000" in info.value.body["message"]
    assert db.execute(limited, "SELECT count(*) FROM files")[0][0] == rows and db.blob_files(limited) == blobs
    # Another project has its own allowance; deleting frees this one's.
    _client(limited, "key-b").files.create(file=("five.jsonl", b"{}\n" * 1700), purpose="batch")
    client.files.delete(first.id)
    assert client.files.create(file=("five.jsonl", b"{}\n" * 1700), purpose="batch").bytes == 5100


def test_active_batch_limit_is_429_until_one_ends(limited):
    client = _client(limited, "key-list")
    file = client.files.create(file=("in.jsonl", b"{}\n"), purpose="batch")

    def create():
        return client.batches.create(input_file_id=file.id, endpoint="/v1/chat/completions", completion_window="24h")

    running = [create().id, create().id]
    for batch_id in running:
        db.hold_elsewhere(limited, batch_id)
    with pytest.raises(openai.RateLimitError) as info:
        create()
    assert info.value.body["code"] == "rate_limit_exceeded"
    assert "Limit: 2 active batches" in info.value.body["message"]
    assert len(client.batches.list().data) == 2
    db.execute(limited, "UPDATE batches SET status = 'completed' WHERE id = :id", id=running[0])
    assert create().status == "validating"


def test_a_projects_own_limits_replace_the_servers(limited):
    """`batchd projects set --max-bytes | --max-active-batches`: a number of its own, or none."""

    async def own_limits() -> None:
        await set_project(limited.runtime.db, "proj-load", max_bytes=3000, max_active_batches=NO_LIMIT)

    limited.call(own_limits)
    client = _client(limited, "key-load")
    with pytest.raises(openai.RateLimitError) as info:
        client.files.create(file=("four.jsonl", b"{}\n" * 1300), purpose="batch")
    assert "limit is 3000" in info.value.body["message"]
    file = client.files.create(file=("in.jsonl", b"{}\n"), purpose="batch")
    for _ in range(3):  # past the server's 2: this project has no active-batch limit
        client.batches.create(input_file_id=file.id, endpoint="/v1/chat/completions", completion_window="24h")
    assert len(client.batches.list().data) == 3


def test_the_default_quotas_are_on_and_documented():
    """Non-zero defaults, far above one team's use (a 2 GB file, a few hundred batches), that stop
    one project from filling the disk or the queue; each is in the settings table."""
    defaults = Settings.model_fields
    assert defaults["project_max_bytes"].default == 100 * 1024**3
    assert defaults["project_max_active_batches"].default == 1000
    table = (Path(__file__).parents[3] / "docs" / "configuration.md").read_text()
    assert "| `BATCHD_PROJECT_MAX_BYTES` | 107374182400 (100 GiB) |" in table
    assert "| `BATCHD_PROJECT_MAX_ACTIVE_BATCHES` | 1000 |" in table
    limits = (Path(__file__).parents[3] / "docs" / "limits.md").read_text()
    assert "100 GiB" in limits and "1000" in limits


def test_json_bodies_are_capped_with_413(limited):
    url, auth = f"{limited.base_url}/batches", {"Authorization": "Bearer key-a"}
    body = {
        "input_file_id": "file-x",
        "endpoint": "/v1/chat/completions",
        "completion_window": "24h",
        "metadata": {"pad": "x" * 5000},
    }
    declared = limited.http.post(url, headers=auth, json=body)
    chunked = limited.http.post(
        url,
        headers={**auth, "Content-Type": "application/json"},
        content=iter([json.dumps(body).encode()[i : i + 1000] for i in range(0, 6000, 1000)]),
    )
    for response in (declared, chunked):
        assert response.status_code == 413, response.text
        error = response.json()["error"]
        assert error["type"] == "invalid_request_error" and "4096 bytes" in error["message"]
        assert response.headers["x-request-id"].startswith("req_")
    small = limited.http.post(url, headers=auth, json={**body, "metadata": {"pad": "x" * 100}})
    assert small.status_code == 404  # under the cap: read, and the file is unknown


NASTY_NAMES = {
    b"../../etc/passwd.jsonl": "passwd.jsonl",
    b"..\\..\\windows\\win.jsonl": "win.jsonl",
    b'a\\"b; filename=evil.jsonl': 'a"b; filename=evil.jsonl',
    b"tab\there\x7f\x1b[31m.jsonl": "tabhere[31m.jsonl",
    "données \u2028 x.jsonl".encode(): "données \u2028 x.jsonl",
}


def _upload_raw(server, filename: bytes) -> httpx.Response:
    boundary = b"nasty0boundary"
    body = (
        b"--" + boundary + b'\r\nContent-Disposition: form-data; name="purpose"\r\n\r\nbatch\r\n'
        b"--"
        + boundary
        + b'\r\nContent-Disposition: form-data; name="file"; filename="'
        + filename
        + b'"\r\nContent-Type: application/octet-stream\r\n\r\n{}\n\r\n--'
        + boundary
        + b"--\r\n"
    )
    return server.http.post(
        f"{server.base_url}/files",
        content=body,
        headers={"Authorization": "Bearer key-a", "Content-Type": f"multipart/form-data; boundary={boundary.decode()}"},
    )


def test_file_names_are_stored_and_served_safely(server, client):
    for raw, expected in NASTY_NAMES.items():
        created = _upload_raw(server, raw)
        assert created.status_code == 200, created.text
        assert created.json()["filename"] == expected
        content = server.http.get(
            f"{server.base_url}/files/{created.json()['id']}/content", headers={"Authorization": "Bearer key-a"}
        )
        assert content.content == b"{}\n"
        dispositions = content.headers.get_list("content-disposition")
        assert len(dispositions) == 1 and "\r" not in dispositions[0] and "\n" not in dispositions[0]
        assert set(content.headers) <= {
            "content-disposition",
            "content-type",
            "content-length",
            "etag",
            "last-modified",
            "accept-ranges",
            "x-request-id",
            "date",
            "server",
        }
        parsed = Message()
        parsed["content-disposition"] = dispositions[0]
        assert parsed.get_filename() == expected
    # Blob paths come from ids only: nothing named after a client's name exists on disk.
    assert not any("passwd" in str(p) or "win.jsonl" in str(p) for p in db.blob_files(server))
    # A CR/LF the official client sends in a name cannot split a header either.
    made = client.files.create(file=("evil\r\nSet-Cookie: a=b.jsonl", b"{}\n"), purpose="batch")
    assert "\r" not in made.filename and "\n" not in made.filename
    served = client.files.with_raw_response.content(made.id)
    assert "set-cookie" not in served.headers
