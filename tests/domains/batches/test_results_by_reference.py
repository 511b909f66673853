"""Results by reference (batchd's, in the create body through the official client's
`extra_body`): a batch created with `output_uri` (an allowed `s3://` prefix) or `output_urls`
(presigned PUT URLs; here a PUT receiver on 127.0.0.1) has its output and error files copied
there once it ends, retried with backoff; the batch object shows the export, and its files
still download. A batch without either is exactly OpenAI's object. The S3 destination is the
suite's SeaweedFS on every backend (on SQLite + local blobs, written with a client of its own)."""

from __future__ import annotations

import asyncio
import time
import uuid

import openai
import pytest
from aiobotocore.session import get_session

from app.background.exporter import Exporter
from app.db.repositories.batches import BatchRepository
from app.domains.batches import export
from harness.seaweedfs import ACCESS_KEY, REGION, SECRET_KEY, ensure_bucket
from harness.seaweedfs import client as s3_client
from tests.conftest import API_KEYS_ENV
from tests.support.app_server import AppServer
from tests.support.batches import chat_line, create, wait_for
from tests.support.fake_engine import FakeEngines
from tests.support.put_receiver import PutReceiver
from tests.support.s3 import keys, uploads

MAX_ATTEMPTS = 3


@pytest.fixture(scope="module")
def bucket(seaweedfs) -> str:
    name = f"results-{uuid.uuid4().hex[:12]}"
    ensure_bucket(seaweedfs, name)
    return name


@pytest.fixture(scope="module")
def receiver():
    server = PutReceiver()
    yield server
    server.close()


@pytest.fixture(scope="module")
def engines() -> FakeEngines:
    return FakeEngines()


@pytest.fixture(scope="module")
def app(start_app, seaweedfs, bucket, engines) -> AppServer:
    return start_app(
        {
            "BATCHD_API_KEYS": API_KEYS_ENV,
            "BATCHD_OUTBOUND_ALLOW": "127.0.0.1",
            "BATCHD_IMPORT_ALLOWED_URIS": f"s3://{bucket}/allowed/",
            "BATCHD_EXPORT_MAX_ATTEMPTS": str(MAX_ATTEMPTS),
            "BATCHD_EXPORT_RETRY_BASE_SECONDS": "0.2",
            "BATCHD_EXPORT_POLL_SECONDS": "0.1",
            "BATCHD_S3_ENDPOINT_URL": seaweedfs.endpoint_url,
            "AWS_ACCESS_KEY_ID": ACCESS_KEY,
            "AWS_SECRET_ACCESS_KEY": SECRET_KEY,
            "AWS_DEFAULT_REGION": REGION,
        },
        engines=engines,
    )


def _lines(tag: str, failing: int = 2) -> list[dict]:
    """Five lines that succeed and `failing` the fake engine answers 400 (error-file lines)."""
    return [chat_line(f"{tag}-{i}") for i in range(5)] + [
        chat_line(f"{tag}-bad-{i}", text="fake:400") for i in range(failing)
    ]


def _exported(client: openai.OpenAI, batch_id: str):
    """The ended batch once its export is no longer pending."""
    done = wait_for(
        client,
        batch_id,
        statuses=(),
        timeout=60,
        until=lambda b: b.status in ("completed", "failed") and (b.model_extra or {})["export"]["status"] != "pending",
    )
    return done, done.model_extra["export"]


def _object(seaweedfs, bucket: str, key: str) -> bytes:
    return s3_client(seaweedfs).get_object(Bucket=bucket, Key=key)["Body"].read()


def test_output_uri_copies_both_files_under_the_prefix(app: AppServer, seaweedfs, bucket: str):
    client = app.client("key-a")
    batch = create(client, _lines("s3"), extra_body={"output_uri": f"s3://{bucket}/allowed/run"})
    assert batch.model_extra["export"] == {
        "status": "pending",
        "output_uri": f"s3://{bucket}/allowed/run/",  # a prefix: the "/" added
        "attempts": 0,
        "error": None,
    }
    done, exported = _exported(client, batch.id)
    assert done.status == "completed" and done.request_counts.failed == 2
    assert exported == {
        "status": "completed",
        "output_uri": f"s3://{bucket}/allowed/run/",
        "attempts": 1,
        "error": None,
    }
    prefix = f"allowed/run/{batch.id}/"
    assert keys(seaweedfs, bucket, prefix) == [prefix + "error.jsonl", prefix + "output.jsonl"]
    output = client.files.content(done.output_file_id).read()
    errors = client.files.content(done.error_file_id).read()
    assert output.count(b"\n") == 5 and errors.count(b"\n") == 2  # the files still download
    assert _object(seaweedfs, bucket, prefix + "output.jsonl") == output
    assert _object(seaweedfs, bucket, prefix + "error.jsonl") == errors
    assert uploads(seaweedfs, bucket) == []


def test_output_uri_copies_only_the_files_there_are(app: AppServer, seaweedfs, bucket: str):
    client = app.client("key-a")
    batch = create(client, _lines("ok", failing=0), extra_body={"output_uri": f"s3://{bucket}/allowed/only-ok/"})
    done, exported = _exported(client, batch.id)
    assert done.error_file_id is None and exported["status"] == "completed"
    prefix = f"allowed/only-ok/{batch.id}/"
    assert keys(seaweedfs, bucket, prefix) == [prefix + "output.jsonl"]
    assert _object(seaweedfs, bucket, prefix + "output.jsonl") == client.files.content(done.output_file_id).read()


def test_output_urls_are_retried_until_the_receiver_takes_them(app: AppServer, receiver: PutReceiver):
    client = app.client("key-a")
    run = uuid.uuid4().hex
    receiver.fail_first[f"/{run}/out"] = 2  # 500, 500, then 200
    urls = {"output": receiver.url(f"/{run}/out"), "error": receiver.url(f"/{run}/err")}
    batch = create(client, _lines("put"), extra_body={"output_urls": urls})
    assert batch.model_extra["export"]["output_urls"] == ["output", "error"]
    assert "secret" not in str(batch.model_extra)  # the URLs (their signatures) are never shown
    done, exported = _exported(client, batch.id)
    assert exported == {"status": "completed", "output_urls": ["output", "error"], "attempts": 3, "error": None}
    assert receiver.attempts[f"/{run}/out"] == 3 and receiver.attempts[f"/{run}/err"] == 1
    output = client.files.content(done.output_file_id).read()
    errors = client.files.content(done.error_file_id).read()
    assert receiver.bodies[f"/{run}/out"] == output and receiver.bodies[f"/{run}/err"] == errors
    assert receiver.lengths[f"/{run}/out"] == str(len(output))  # a known size, not chunked


def test_a_kind_without_a_url_is_skipped(app: AppServer, receiver: PutReceiver):
    client = app.client("key-a")
    run = uuid.uuid4().hex
    batch = create(client, _lines("skip"), extra_body={"output_urls": {"error": receiver.url(f"/{run}/err")}})
    done, exported = _exported(client, batch.id)
    assert exported["status"] == "completed" and exported["output_urls"] == ["error"]
    assert receiver.bodies[f"/{run}/err"] == client.files.content(done.error_file_id).read()
    assert not any(path.startswith(f"/{run}/") and path != f"/{run}/err" for path in receiver.attempts)


def test_a_receiver_that_always_fails_leaves_the_export_failed(app: AppServer, receiver: PutReceiver):
    client = app.client("key-a")
    run = uuid.uuid4().hex
    batch = create(client, _lines("fail"), extra_body={"output_urls": {"output": receiver.url(f"/always-fail/{run}")}})
    done, exported = _exported(client, batch.id)
    assert exported["status"] == "failed" and exported["attempts"] == MAX_ATTEMPTS
    assert exported["error"] == {"code": "http_status", "message": "The output URL answered HTTP 500."}
    assert receiver.attempts[f"/always-fail/{run}"] == MAX_ATTEMPTS
    # The batch itself completed, and its files download as usual.
    assert done.status == "completed" and client.batches.retrieve(batch.id).status == "completed"
    assert client.files.content(done.output_file_id).read().count(b"\n") == 5


def test_replicas_racing_make_each_attempt_once(app: AppServer, receiver: PutReceiver):
    """Three more exporters on the app's database beside its own, as replicas would be: each
    attempt is claimed by one of them (the receiver sees exactly the allowed attempts)."""
    client = app.client("key-a")
    run = uuid.uuid4().hex
    batch = create(client, _lines("race"), extra_body={"output_urls": {"output": receiver.url(f"/always-fail/{run}")}})
    runtime = app.runtime

    async def race() -> None:
        exporters = [Exporter(runtime.db, runtime.store, runtime.settings) for _ in range(3)]
        deadline = time.monotonic() + 60
        while time.monotonic() < deadline and receiver.attempts[f"/always-fail/{run}"] < MAX_ATTEMPTS:
            await asyncio.gather(*(exporter.export_due() for exporter in exporters))
            await asyncio.sleep(0.01)
        await asyncio.gather(*(task for exporter in exporters for task in list(exporter._running)))

    app.call(race)
    _, exported = _exported(client, batch.id)
    assert exported["status"] == "failed" and exported["attempts"] == MAX_ATTEMPTS
    assert receiver.attempts[f"/always-fail/{run}"] == MAX_ATTEMPTS


def test_an_attempt_a_dead_replica_held_counts_and_the_next_follows_its_lease(
    app: AppServer, engines: FakeEngines, receiver: PutReceiver
):
    """A replica that claimed an attempt and died (here: the claim alone, nothing sent) holds the
    export until its lease runs out; then the app's exporter makes the next attempt."""
    client = app.client("key-a")
    run = uuid.uuid4().hex
    engines.hold()
    try:
        batch = create(
            client,
            [chat_line("lease-0", text="fake:hold")],
            extra_body={"output_urls": {"output": receiver.url(f"/{run}/out")}},
        )

        held_until = time.time() + 1.5

        async def claim() -> bool:
            async with app.runtime.db.write() as session:
                return await BatchRepository(session).claim_export(batch.id, 0, time.time(), held_until)

        assert app.call(claim)  # the batch runs: nothing else could have claimed it yet
    finally:
        engines.release()
    done, exported = _exported(client, batch.id)
    assert time.time() >= held_until  # not before the lease ran out
    assert exported == {"status": "completed", "output_urls": ["output"], "attempts": 2, "error": None}
    assert receiver.attempts[f"/{run}/out"] == 1
    assert receiver.bodies[f"/{run}/out"] == client.files.content(done.output_file_id).read()


def test_an_output_uri_outside_the_allowed_prefixes_is_403_and_nothing_is_created(app: AppServer, bucket: str):
    client = app.client("key-b")
    file = client.files.create(file=("in.jsonl", b'{"custom_id": "x"}\n'), purpose="batch")
    before = [b.id for b in client.batches.list()]
    for uri in (f"s3://{bucket}/private/", f"s3://{bucket}/allowed-not/", f"s3://other-{bucket}/allowed/"):
        with pytest.raises(openai.PermissionDeniedError) as refused:
            client.batches.create(
                input_file_id=file.id,
                endpoint="/v1/chat/completions",
                completion_window="24h",
                extra_body={"output_uri": uri},
            )
        assert refused.value.code == "uri_not_allowed" and refused.value.param == "output_uri"
        assert "BATCHD_IMPORT_ALLOWED_URIS" in refused.value.message
    assert [b.id for b in client.batches.list()] == before
    # A quote refuses it as create would.
    body = {"input_file_id": file.id, "endpoint": "/v1/chat/completions", "completion_window": "24h"}
    quoted = app.http.post(
        "/v1/batches/estimate", headers=app.as_key("key-b"), json={**body, "output_uri": f"s3://{bucket}/private/"}
    )
    assert quoted.status_code == 403 and quoted.json()["error"]["code"] == "uri_not_allowed", quoted.text


@pytest.mark.parametrize(
    ("extra", "param", "code"),
    [
        ({"output_uri": "s3://b/allowed/", "output_urls": {"output": "http://127.0.0.1/x"}}, "output_urls", None),
        ({"output_uri": "https://example.com/out/"}, "output_uri", None),
        ({"output_uri": "s3://b/allowed/../x/"}, "output_uri", None),
        ({"output_uri": 3}, "output_uri", None),
        ({"output_urls": {"output": "ftp://127.0.0.1/x"}}, "output_urls.output", None),
        (
            {"output_urls": {"output": "http://127.0.0.1/x", "results": "http://127.0.0.1/y"}},
            "output_urls.results",
            None,
        ),
        ({"output_urls": {}}, "output_urls", None),
        ({"output_urls": "http://127.0.0.1/x"}, "output_urls", None),
        ({"output_urls": {"output": "http://10.0.0.1/x"}}, "output_urls.output", "url_refused"),
    ],
)
def test_bad_destinations_are_a_400_naming_the_parameter(app: AppServer, extra: dict, param: str, code: str | None):
    client = app.client("key-b")
    file = client.files.create(file=("in.jsonl", b'{"custom_id": "x"}\n'), purpose="batch")
    reply = app.http.post(
        "/v1/batches",
        headers=app.as_key("key-b"),
        json={"input_file_id": file.id, "endpoint": "/v1/chat/completions", "completion_window": "24h", **extra},
    )
    assert reply.status_code == 400, reply.text
    error = reply.json()["error"]
    assert error["type"] == "invalid_request_error" and error["param"] == param, error
    if code is not None:
        assert error["code"] == code


def test_a_batch_without_a_destination_has_no_export_key(app: AppServer):
    client = app.client("key-a")
    batch = create(client, _lines("plain", failing=0))
    done = wait_for(client, batch.id, timeout=60)
    assert done.status == "completed"
    shown = app.http.get(f"/v1/batches/{batch.id}", headers=app.as_key("key-a")).json()
    assert "export" not in shown and "export" not in (batch.model_extra or {})
    listed = app.http.get("/v1/batches", headers=app.as_key("key-a")).json()["data"]
    assert all("export" not in b for b in listed if b["id"] == batch.id)


def test_a_large_file_goes_up_in_parts_and_equals_its_source(seaweedfs, bucket: str):
    """More than two parts' worth: a multipart upload whose object is the bytes in order, with
    nothing left unfinished; a failing source aborts its upload."""
    piece = bytes(range(256)) * 4096  # 1 MiB
    chunks = [piece[i:] + piece[:i] for i in range(19)]  # 19 MiB, each MiB rotated differently

    async def source(fail: bool = False):
        for n, chunk in enumerate(chunks):
            if fail and n == 12:
                raise OSError("the blob went away")
            yield chunk

    async def run() -> None:
        session = get_session()
        async with session.create_client(
            "s3",
            endpoint_url=seaweedfs.endpoint_url,
            aws_access_key_id=ACCESS_KEY,
            aws_secret_access_key=SECRET_KEY,
            region_name=REGION,
        ) as s3:
            await export._upload(s3, bucket, "large/whole.jsonl", source(), {})
            with pytest.raises(OSError):
                await export._upload(s3, bucket, "large/broken.jsonl", source(fail=True), {})

    asyncio.run(run())
    assert _object(seaweedfs, bucket, "large/whole.jsonl") == b"".join(chunks)
    assert keys(seaweedfs, bucket, "large/") == ["large/whole.jsonl"]
    assert uploads(seaweedfs, bucket, "large/") == []
