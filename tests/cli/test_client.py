"""`batchd batches` and `batchd files`, the client commands, run by their entry point against the app
in process on the fake engine (tests/support/fake_engine.py): the same `openai` client the
command builds from OPENAI_BASE_URL / OPENAI_API_KEY, its requests sent through the app's
TestClient instead of a socket."""

from __future__ import annotations

import fcntl
import io
import json
import os
import pty
import struct
import termios
import threading
import uuid
from argparse import Namespace
from contextlib import redirect_stderr, redirect_stdout
from pathlib import Path
from types import SimpleNamespace

import pytest

from app.cli import client_common, client_files, main
from harness.poll import wait_until
from tests.support.batches import chat_line, jsonl, wait_for

KEY = "key-a"


@pytest.fixture
def batchd(fake_server, monkeypatch):
    """`batchd ARGS` -> its exit status and output, its client pointed at the app by the environment."""
    monkeypatch.setenv("OPENAI_BASE_URL", fake_server.base_url)
    monkeypatch.setenv("OPENAI_API_KEY", KEY)
    opened = client_common.open_client
    monkeypatch.setattr(
        client_common, "open_client", lambda args: opened(args).with_options(http_client=fake_server.http)
    )

    def run(*args: str, stderr=None) -> SimpleNamespace:
        out, err = io.StringIO(), stderr or io.StringIO()
        with redirect_stdout(out), redirect_stderr(err):
            try:
                code = main(list(args))
            except SystemExit as exit_:  # argparse's refusals
                code = exit_.code
        return SimpleNamespace(returncode=code, stdout=out.getvalue(), stderr=getattr(err, "getvalue", str)())

    return run


def _requests(tmp_path: Path, lines: list[dict]) -> Path:
    path = tmp_path / "requests.jsonl"
    path.write_bytes(jsonl(lines))
    return path


def _jsonl(path: Path) -> list[dict]:
    return [json.loads(line) for line in path.read_text().splitlines()]


def test_create_waits_and_saves_the_output_file(batchd, fake_client, tmp_path):
    requests = _requests(tmp_path, [chat_line(f"line-{i}", f"text {i}") for i in range(5)])
    out, err = tmp_path / "out.jsonl", tmp_path / "err.jsonl"
    result = batchd(
        *("batches", "create", str(requests), "--endpoint", "/v1/chat/completions", "--metadata", "team=a"),
        *("--wait", "--output", str(out), "--errors", str(err), "--poll-interval", "0.05"),
    )
    assert result.returncode == 0, result.stderr
    batch = fake_client.batches.retrieve(result.stdout.strip())
    assert (batch.status, batch.metadata, batch.request_counts.completed) == ("completed", {"team": "a"}, 5)
    lines = sorted(_jsonl(out), key=lambda line: line["custom_id"])
    assert [line["custom_id"] for line in lines] == [f"line-{i}" for i in range(5)]
    for i, line in enumerate(lines):
        assert line["response"]["status_code"] == 200
        assert line["response"]["body"]["choices"][0]["message"]["content"] == f"echo: text {i}"
    assert err.read_bytes() == b""
    # stderr is no terminal here: lines, no bar.
    assert f"{batch.id} completed: 5/5 lines (0 failed)" in result.stderr.splitlines()
    assert "\r" not in result.stderr


def test_a_cancelled_batch_exits_5(batchd, fake_client, tmp_path):
    tag = uuid.uuid4().hex
    requests = _requests(tmp_path, [chat_line("done")] + [chat_line(f"stuck-{i}", "fake:stall") for i in range(2)])
    results: list[SimpleNamespace] = []
    args = ("batches", "create", str(requests), "--endpoint", "/v1/chat/completions", "--metadata", f"tag={tag}")
    waiting = threading.Thread(target=lambda: results.append(batchd(*args, "--wait", "--poll-interval", "0.05")))
    waiting.start()
    try:
        batch = wait_until(
            lambda: next(
                (
                    b
                    for b in fake_client.batches.list()
                    if (b.metadata or {}).get("tag") == tag and b.request_counts.completed == 1
                ),
                None,
            ),
            what="the batch's first line done",
        )
        fake_client.batches.cancel(batch.id)
    finally:
        waiting.join(timeout=60)
    assert results[0].returncode == client_common.EXIT_CANCELLED == 5
    assert results[0].stdout.strip() == batch.id
    assert f"batchd: {batch.id} cancelled" in results[0].stderr


def test_a_failed_batch_exits_3_and_an_expired_one_4(batchd, tmp_path):
    unknown = _requests(tmp_path, [chat_line("a", model="no-such-model")])
    failed = batchd("batches", "create", str(unknown), "--endpoint", "/v1/chat/completions", "--wait", "--json")
    assert failed.returncode == 3, failed.stderr
    assert json.loads(failed.stdout)["errors"]["data"][0]["code"] == "model_not_found"
    stalled = _requests(tmp_path, [chat_line("stuck", "fake:stall")])
    args = ("batches", "create", str(stalled), "--endpoint", "/v1/chat/completions", "--window", "3s")
    expired = batchd(*args, "--wait", "--poll-interval", "0.2", "--json")
    assert expired.returncode == 4, expired.stderr
    assert json.loads(expired.stdout)["status"] == "expired"


def test_json_output_is_the_api_objects(batchd, fake_client, tmp_path):
    requests = _requests(tmp_path, [chat_line("fine"), chat_line("flaky", "fake:fail")])
    created = batchd("batches", "create", str(requests), "--endpoint", "/v1/chat/completions", "--json")
    assert created.returncode == 0, created.stderr
    batch_id = json.loads(created.stdout)["id"]
    done = wait_for(fake_client, batch_id, timeout=30)
    got = batchd("batches", "get", batch_id, "--json")
    assert json.loads(got.stdout) == done.model_dump(mode="json")
    listed = json.loads(batchd("batches", "list", "--json", "--limit", "100").stdout)
    assert batch_id in [b["id"] for b in listed]
    assert [b["id"] for b in json.loads(batchd("batches", "list", "--json", "--limit", "1").stdout)] == [
        listed[0]["id"]
    ]
    # retry: a new batch of the failed line only, done once it has ended.
    retried = batchd("batches", "retry", batch_id, "--json", "--wait", "--poll-interval", "0.05")
    assert retried.returncode == 0, retried.stderr
    again = json.loads(retried.stdout)
    assert (again["retry_of"], again["request_counts"]["total"]) == (batch_id, 1)
    err = tmp_path / "err.jsonl"
    downloaded = batchd("batches", "download", batch_id, "--errors", str(err))
    assert downloaded.returncode == 0, downloaded.stderr
    assert [line["custom_id"] for line in _jsonl(err)] == ["flaky"]


def test_estimate_quotes_the_file_and_leaves_no_file(batchd, fake_client, tmp_path):
    requests = _requests(tmp_path, [chat_line(f"q-{i}") for i in range(3)])
    before = {f.id for f in fake_client.files.list()}
    quote = batchd("batches", "estimate", str(requests), "--endpoint", "/v1/chat/completions", "--json")
    assert quote.returncode == 0, quote.stderr
    parsed = json.loads(quote.stdout)
    assert (parsed["object"], parsed["lines"], parsed["errors"]) == ("batch.estimate", 3, None)
    assert {f.id for f in fake_client.files.list()} == before


def test_files_round_trip_and_chunked_uploads(batchd, fake_client, tmp_path, monkeypatch):
    data = jsonl([chat_line(f"f-{i}") for i in range(20)])
    path = tmp_path / "big.jsonl"
    path.write_bytes(data)
    monkeypatch.setattr(client_files, "SINGLE_UPLOAD_LIMIT", 1000)
    monkeypatch.setattr(client_files, "PART_SIZE", 1024)
    uploaded = batchd("files", "upload", str(path), "--json")
    assert uploaded.returncode == 0, uploaded.stderr
    file = json.loads(uploaded.stdout)
    assert (file["bytes"], file["purpose"], file["filename"]) == (len(data), "batch", "big.jsonl")
    assert json.loads(batchd("files", "get", file["id"], "--json").stdout) == file
    assert batchd("files", "list", "--purpose", "batch").stdout.count(file["id"]) == 1
    copy = tmp_path / "copy.jsonl"
    assert batchd("files", "download", file["id"], "-o", str(copy)).returncode == 0
    assert copy.read_bytes() == data
    assert json.loads(batchd("files", "delete", file["id"], "--json").stdout)["deleted"] is True
    gone = batchd("files", "get", file["id"])
    assert gone.returncode == 1 and gone.stderr.startswith("batchd: error: 404 ")
    assert gone.stderr.count("\n") == 1


def test_usage_errors_exit_2(batchd, tmp_path):
    assert batchd("batches", "create", "x.jsonl").returncode == 2  # no --endpoint
    requests = _requests(tmp_path, [chat_line("a")])
    no_wait = batchd("batches", "create", str(requests), "--endpoint", "/v1/chat/completions", "--output", "o")
    assert (no_wait.returncode, no_wait.stdout) == (2, "")
    assert batchd("batches", "create", str(requests), "--endpoint", "e", "--metadata", "novalue").returncode == 2


def test_the_progress_bar_in_a_terminal(batchd, tmp_path):
    requests = _requests(tmp_path, [chat_line(f"p-{i}") for i in range(4)])
    master, slave = pty.openpty()
    fcntl.ioctl(slave, termios.TIOCSWINSZ, struct.pack("HHHH", 24, 120, 0, 0))  # a new pty is 0 columns wide
    seen = bytearray()

    def read() -> None:
        while True:
            try:
                chunk = os.read(master, 4096)
            except OSError:  # the slave side closed
                return
            if not chunk:
                return
            seen.extend(chunk)

    reader = threading.Thread(target=read)
    reader.start()
    with open(slave, "w", closefd=True) as terminal:
        assert terminal.isatty()
        args = ("batches", "create", str(requests), "--endpoint", "/v1/chat/completions", "--wait")
        result = batchd(*args, "--poll-interval", "0.05", stderr=terminal)
    reader.join(timeout=10)
    os.close(master)
    text = seen.decode(errors="replace")
    assert result.returncode == 0
    assert result.stdout.strip() in text
    assert "4/4" in text and "line/s" in text and "100%|" in text and "completed, 0 failed" in text


def test_the_client_comes_from_the_flags_or_the_environment(monkeypatch):
    monkeypatch.setenv("OPENAI_BASE_URL", "http://127.0.0.1:1/v1")
    monkeypatch.setenv("OPENAI_API_KEY", "from-env")
    from_env = client_common.open_client(Namespace(base_url=None, api_key=None))
    assert (str(from_env.base_url), from_env.api_key) == ("http://127.0.0.1:1/v1/", "from-env")
    given = client_common.open_client(Namespace(base_url="http://127.0.0.1:2/v1", api_key="given"))
    assert (str(given.base_url), given.api_key) == ("http://127.0.0.1:2/v1/", "given")
