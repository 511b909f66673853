"""Files by reference from S3: `POST /v1/files` with `{"purpose", "url": "s3://bucket/key"}` reads
the object with the server's own S3 credentials, only under a prefix the operator allows (the
server-wide BATCHD_IMPORT_ALLOWED_URIS, or the project's own list); a presigned GET URL of the
same S3 server imports through the http path. On Postgres + the suite's S3 server."""

from __future__ import annotations

import uuid

import openai
import pytest

from harness.seaweedfs import client as s3_client
from harness.seaweedfs import ensure_bucket
from tests.conftest import API_KEYS_ENV, WEBHOOK_TEST_ENV
from tests.support.app_server import AppServer
from tests.support.cli import on
from tests.support.s3 import put

pytestmark = pytest.mark.parametrize("backend", ["postgres-s3"], indirect=True)

ADMIN = "admin-import"
BODY = b"".join(
    b'{"custom_id": "r%d", "method": "POST", "url": "/v1/chat/completions", "body": {}}\n' % i for i in range(3000)
)


@pytest.fixture(scope="module")
def source(seaweedfs) -> str:
    """A bucket of its own holding the inputs, apart from the server's blob bucket."""
    bucket = f"inputs-{uuid.uuid4().hex[:12]}"
    ensure_bucket(seaweedfs, bucket)
    for key in ("shared/in.jsonl", "team/in.jsonl", "private/in.jsonl"):
        put(seaweedfs, bucket, key, BODY)
    return bucket


@pytest.fixture(scope="module")
def app(start_app, source) -> AppServer:
    return start_app(
        {
            "BATCHD_API_KEYS": API_KEYS_ENV,
            "BATCHD_ADMIN_KEYS": ADMIN,
            "BATCHD_IMPORT_ALLOWED_URIS": f"s3://{source}/shared/",
            **WEBHOOK_TEST_ENV,
        }
    )


def _import(client: openai.OpenAI, url: str) -> dict:
    return client.post("/files", body={"purpose": "batch", "url": url}, cast_to=dict)


def test_an_allowed_prefix_imports_the_bytes_of_an_upload(app: AppServer, source: str):
    client = app.client("key-a")
    imported = _import(client, f"s3://{source}/shared/in.jsonl")
    assert (imported["filename"], imported["bytes"]) == ("in.jsonl", len(BODY))
    assert imported["source"] == {"url": f"s3://{source}/shared/in.jsonl"}
    uploaded = client.files.create(file=("in.jsonl", BODY), purpose="batch")
    assert client.files.content(imported["id"]).read() == client.files.content(uploaded.id).read() == BODY


def test_a_prefix_not_allowed_is_403_with_the_reason(app: AppServer, source: str):
    with pytest.raises(openai.PermissionDeniedError) as refused:
        _import(app.client("key-a"), f"s3://{source}/private/in.jsonl")
    assert refused.value.code == "uri_not_allowed"
    assert "BATCHD_IMPORT_ALLOWED_URIS" in refused.value.message and "--allow-uri" in refused.value.message
    # A look-alike of the allowed prefix, or a path that climbs out of it, is no better.
    for url in (f"s3://{source}/shared-not/in.jsonl", f"s3://{source}/shared/../private/in.jsonl"):
        with pytest.raises((openai.PermissionDeniedError, openai.BadRequestError)):
            _import(app.client("key-a"), url)


def test_a_project_allowed_by_the_administration_api_imports_there(app: AppServer, source: str):
    admin = app.as_key(ADMIN)
    created = app.http.post("/v1/organization/projects", headers=admin, json={"name": "Importers"})
    project = created.json()["id"]
    account = app.http.post(f"/v1/organization/projects/{project}/service_accounts", headers=admin, json={"name": "s"})
    client = app.client(account.json()["api_key"]["value"])
    with pytest.raises(openai.PermissionDeniedError):
        _import(client, f"s3://{source}/team/in.jsonl")

    bad = app.http.post(f"/v1/organization/projects/{project}", headers=admin, json={"allowed_import_uris": ["x"]})
    assert bad.status_code == 400, bad.text
    updated = app.http.post(
        f"/v1/organization/projects/{project}", headers=admin, json={"allowed_import_uris": [f"s3://{source}/team/"]}
    )
    assert updated.status_code == 200 and updated.json()["allowed_import_uris"] == [f"s3://{source}/team/"]
    assert _import(client, f"s3://{source}/team/in.jsonl")["bytes"] == len(BODY)
    # Only that project: another one's key still may not read there.
    with pytest.raises(openai.PermissionDeniedError):
        _import(app.client("key-a"), f"s3://{source}/team/in.jsonl")


def test_a_missing_object_under_an_allowed_prefix_is_a_bad_request(app: AppServer, source: str):
    with pytest.raises(openai.BadRequestError) as failed:
        _import(app.client("key-a"), f"s3://{source}/shared/none.jsonl")
    assert failed.value.code == "import_failed"


def test_a_presigned_url_imports_the_same_bytes(app: AppServer, source: str, seaweedfs):
    url = s3_client(seaweedfs).generate_presigned_url(
        "get_object", Params={"Bucket": source, "Key": "private/in.jsonl"}, ExpiresIn=600
    )
    assert url.startswith("http://127.0.0.1:")
    client = app.client("key-a")
    imported = _import(client, url)
    assert imported["filename"] == "in.jsonl"
    assert imported["source"] == {"url": url.split("?")[0]} and "Signature" not in str(imported["source"])
    assert client.files.content(imported["id"]).read() == BODY


def test_a_project_allowed_by_the_cli_imports_there_until_cleared(app: AppServer, source: str):
    client = app.client("key-b")
    url = f"s3://{source}/team/in.jsonl"
    with pytest.raises(openai.PermissionDeniedError):
        _import(client, url)
    refused = on(app, "projects", "set", "proj-b", "--allow-uri", "https://x/", check=False)
    assert refused.returncode == 2 and "s3://" in refused.stderr
    shown = on(app, "projects", "set", "proj-b", "--allow-uri", f"s3://{source}/team/", "--allow-uri", "s3://b/p/")
    assert shown.stdout.rstrip("\n").endswith(f"\tallowed import uris s3://{source}/team/,s3://b/p/")
    assert _import(client, url)["bytes"] == len(BODY)
    on(app, "projects", "set", "proj-b", "--allow-uri", "none")
    with pytest.raises(openai.PermissionDeniedError):
        _import(client, url)
