"""Files by reference: `POST /v1/files` with a JSON body imports a file from an http(s) URL
through the outbound policy, with the same bytes as an upload."""

from __future__ import annotations

import http.server
import threading
import time

import openai
import pytest

from harness.poll import wait_until
from tests.conftest import API_KEYS_ENV
from tests.support.hostile_receivers import HostileReceiver

BODY = b"".join(
    b'{"custom_id": "r%d", "method": "POST", "url": "/v1/chat/completions", "body": {}}\n' % i for i in range(2000)
)


@pytest.fixture(scope="module")
def source_url():
    class Handler(http.server.BaseHTTPRequestHandler):
        def do_GET(self):  # noqa: N802
            if not self.path.startswith("/data/input.jsonl"):
                self.send_response(404)
                self.end_headers()
                return
            self.send_response(200)
            self.send_header("content-length", str(len(BODY)))
            self.end_headers()
            self.wfile.write(BODY)

        def log_message(self, *args):
            pass

    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    yield f"http://127.0.0.1:{server.server_address[1]}/data/input.jsonl"
    server.shutdown()
    server.server_close()


def test_import_from_url_has_the_bytes_of_an_upload(fake_client: openai.OpenAI, source_url: str):
    imported = fake_client.post(
        "/files", body={"purpose": "batch", "url": source_url + "?X-Amz-Signature=secret"}, cast_to=dict
    )
    assert imported["filename"] == "input.jsonl"
    assert imported["bytes"] == len(BODY)
    # Where it came from, without the presigned URL's signature; said again when read back.
    assert imported["source"] == {"url": source_url}
    assert fake_client.get(f"/files/{imported['id']}", cast_to=dict)["source"] == {"url": source_url}
    uploaded = fake_client.files.create(file=("input.jsonl", BODY), purpose="batch")
    assert "source" not in fake_client.get(f"/files/{uploaded.id}", cast_to=dict)
    assert fake_client.files.content(imported["id"]).read() == fake_client.files.content(uploaded.id).read() == BODY


def test_import_from_a_refused_address_is_refused(fake_client: openai.OpenAI):
    with pytest.raises(openai.BadRequestError) as refused:
        fake_client.post("/files", body={"purpose": "batch", "url": "http://10.0.0.1/in.jsonl"}, cast_to=dict)
    assert "not a public address" in str(refused.value)


def test_import_needs_an_http_url(fake_client: openai.OpenAI):
    with pytest.raises(openai.BadRequestError):
        fake_client.post("/files", body={"purpose": "batch", "url": "ftp://x/in.jsonl"}, cast_to=dict)


def test_openapi_documents_the_json_body(fake_server):
    spec = fake_server.http.get(fake_server.base_url.replace("/v1", "/openapi.json")).json()
    content = spec["paths"]["/v1/files"]["post"]["requestBody"]["content"]
    assert "multipart/form-data" in content
    assert content["application/json"]["schema"]["required"] == ["purpose", "url"]


def test_an_import_that_trickles_is_cut_at_its_deadline(start_app):
    """A source that sends one byte every 0.2 s (each read well inside httpx's read timeout) holds
    the import only until BATCHD_IMPORT_TIMEOUT_SECONDS: the request then fails and batchd hangs up."""
    app = start_app(
        {"BATCHD_API_KEYS": API_KEYS_ENV, "BATCHD_OUTBOUND_ALLOW": "127.0.0.1", "BATCHD_IMPORT_TIMEOUT_SECONDS": "2"}
    )
    client = app.client("key-a")
    with HostileReceiver("trickle") as source:
        started = time.monotonic()
        with pytest.raises(openai.BadRequestError) as cut:
            client.post("/files", body={"purpose": "batch", "url": source.url + ".jsonl"}, cast_to=dict)
        took = time.monotonic() - started
        assert cut.value.body["code"] == "import_timeout"
        assert "2 seconds" in cut.value.body["message"]
        # Cut by the deadline: the trickle never ends and each read is well inside its timeout.
        assert took >= 2
        wait_until(lambda: source.hung_up, timeout=30)
    assert client.files.list().data == []  # nothing of the cut import is kept
