"""`batchd run-batch` as users run it: a subprocess on files, stdin/stdout and URLs."""

from __future__ import annotations

import contextlib
import json
import os
import signal
import subprocess
import threading
import time
from dataclasses import dataclass
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

import pytest

from harness.server import BATCHD
from tests.support import head_start
from tests.support.batches import CHAT_MODEL, EMBED_MODEL, chat_line, create, jsonl, read_lines, wait_for
from tests.support.engines import EAGER_FLAG
from tests.support.orphans import kill_alone_and_assert_no_orphans

# run-batch runs the built-in models in process (tests/conftest.py: VLLM_FIXTURES).
pytestmark = pytest.mark.vllm

SEEDS = Path(__file__).parents[1] / "fixtures" / "seeds"
# system_fingerprint hashes the engine configuration, which differs between the two setups.
VOLATILE = {"id", "created", "created_at", "request_id", "system_fingerprint"}


def _run_batch_cmd(data_dir: Path, *args: str) -> list[str]:
    return [str(BATCHD), "run-batch", *args, EAGER_FLAG, "--data-dir", str(data_dir)]


def _seed_inputs(model: str) -> bytes:
    """The seeds' example lines for one model, custom_ids prefixed by their file so they stay unique."""
    lines = []
    for path in sorted(SEEDS.glob("*.jsonl")):
        for raw in path.read_bytes().splitlines():
            line = json.loads(raw)
            if line["body"]["model"] == model:
                line["custom_id"] = f"{path.stem}:{line['custom_id']}"
                if "chat" in path.stem:
                    line["body"]["temperature"] = 0
                lines.append(line)
    return jsonl(lines)


def _stable(value):
    """A response body without the fields that differ between any two runs (ids, timestamps)."""
    if isinstance(value, dict):
        return {k: _stable(v) for k, v in value.items() if k not in VOLATILE}
    if isinstance(value, list):
        return [_stable(v) for v in value]
    if isinstance(value, float):
        return round(value, 4)
    return value


def _bad(**changes) -> bytes:
    """A chat line with `changes` (None: the key removed)."""
    line = chat_line("bad")
    line.update(changes)
    return jsonl([{k: v for k, v in line.items() if v is not None}])


# Lines that break the line contract (app/pipeline/lines.py), each with the code both the server
# and run-batch give it. Read from stdin between the seeds' chat lines.
BAD_LINES = [
    (b"{this is not json\n", None, "invalid_json_line"),
    (_bad(custom_id="no-body", body=None), "no-body", "missing_required_parameter"),
    (b"[1, 2]\n", None, "invalid_json_line"),
    (_bad(custom_id=None), None, "missing_required_parameter"),
    (_bad(custom_id="get", method="GET"), "get", "invalid_request"),
    (_bad(custom_id="moderations", url="/v1/moderations"), "moderations", "url_mismatch"),
    (_bad(custom_id=7), 7, "invalid_request"),
    (_bad(custom_id="text-body", body="Hello"), "text-body", "invalid_request"),
    # Not JSON to either (the stdlib's json would have read it).
    (_bad(custom_id="nan").replace(b'"temperature": 0', b'"temperature": NaN'), None, "invalid_json_line"),
]
MALFORMED = b"".join(raw for raw, _, _ in BAD_LINES)


class _ObjectStore(BaseHTTPRequestHandler):
    """A stand-in for presigned S3 URLs: GET serves the input, PUT stores the output after
    failing the first two attempts with 503."""

    input_bytes = b""
    put_attempts = 0
    stored: bytes | None = None
    server: ThreadingHTTPServer

    def do_GET(self):  # noqa: N802
        self.send_response(200)
        self.send_header("Content-Length", str(len(self.input_bytes)))
        self.end_headers()
        self.wfile.write(self.input_bytes)

    def do_PUT(self):  # noqa: N802
        body = self.rfile.read(int(self.headers["Content-Length"]))
        type(self).put_attempts += 1
        if self.put_attempts <= 2:
            self.send_response(503)
        else:
            type(self).stored = body
            self.send_response(200)
        self.send_header("Content-Length", "0")
        self.end_headers()

    def log_message(self, *args):
        pass


# An embedding input far over MiniLM's context: the engine answers it with a 400.
TOO_LONG = {
    "custom_id": "too-long",
    "method": "POST",
    "url": "/v1/embeddings",
    "body": {"model": EMBED_MODEL, "input": " ".join(str(i) for i in range(4000))},
}


@dataclass
class SeedRuns:
    results: dict[str, dict]  # the seeds' lines: {custom_id: result line}
    rejected: list[dict]  # the result lines of MALFORMED, in input order
    chat_stderr: str
    put_attempts: int  # the embedding run's output PUTs (two 503s, then stored)
    staging: Path  # the embedding run's --output-tmp-dir
    errors: list[dict]  # the embedding run's --error-file lines


def _launch_seed_runs(work_dir: Path) -> list[head_start.BackgroundRun]:
    """run-batch over the seeds' examples, once per built-in model and side by side (most of
    each run is its engine's single-threaded start), with a head start (tests/support/head_start.py):
    the chat lines (and MALFORMED) from stdin to stdout; the embedding lines (and TOO_LONG) from a
    presigned GET URL to a presigned PUT URL, with an error file and a staging directory."""
    _ObjectStore.input_bytes = _seed_inputs(EMBED_MODEL) + jsonl([TOO_LONG])
    _ObjectStore.server = ThreadingHTTPServer(("127.0.0.1", 0), _ObjectStore)
    threading.Thread(target=_ObjectStore.server.serve_forever, daemon=True).start()
    bucket = f"http://127.0.0.1:{_ObjectStore.server.server_address[1]}/bucket"
    chat_lines = _seed_inputs(CHAT_MODEL).splitlines(keepends=True)
    chat = head_start.BackgroundRun(
        _run_batch_cmd(work_dir / "chat-models", "-i", "-", "-o", "-", "--model", CHAT_MODEL),
        work_dir / "chat",
        stdin=chat_lines[0] + MALFORMED + b"".join(chat_lines[1:]),
    )
    embed = head_start.BackgroundRun(
        _run_batch_cmd(
            work_dir / "embed-models",
            "-i",
            f"{bucket}/in.jsonl?X-Amz-Signature=abc",
            "-o",
            f"{bucket}/out.jsonl?X-Amz-Signature=def",
            "--error-file",
            str(work_dir / "embed.errors.jsonl"),
            "--output-tmp-dir",
            str(work_dir / "staging"),
            "--model",
            EMBED_MODEL,
        ),
        work_dir / "embed",
    )
    return [chat, embed]


head_start.register(__file__, "seed-runs", _launch_seed_runs)


# Session scope: pytest orders tests by backend, and a module-scoped fixture could run twice.
@pytest.fixture(scope="session")
def seed_runs(head_starts) -> SeedRuns:
    chat_run, embed_run = head_starts.take("seed-runs")
    try:
        chat, embed = chat_run.wait(timeout=900), embed_run.wait(timeout=900)
    finally:
        _ObjectStore.server.shutdown()
    assert chat.returncode == 0, chat.stderr[-3000:]
    assert embed.returncode == 0, embed.stderr[-3000:]
    assert "done: " in embed.stderr and _ObjectStore.stored is not None
    lines = [json.loads(raw) for raw in chat.stdout.splitlines() + _ObjectStore.stored.splitlines()]
    work_dir = embed_run.work_dir.parent
    return SeedRuns(
        results={line["custom_id"]: line for line in lines if line["error"] is None},
        rejected=[line for line in lines if line["error"] is not None],
        chat_stderr=chat.stderr,
        put_attempts=_ObjectStore.put_attempts,
        staging=work_dir / "staging",
        errors=[json.loads(raw) for raw in (work_dir / "embed.errors.jsonl").read_bytes().splitlines()],
    )


# The comparison is of response bodies, which no database touches: the SQLite server suffices.
@pytest.mark.parametrize("backend", ["sqlite"], indirect=True)
def test_seed_files_run_and_match_the_server(seed_runs, model_client):
    seed_results = seed_runs.results
    assert len(seed_results) == sum(len(p.read_bytes().splitlines()) for p in SEEDS.glob("*.jsonl"))
    for model in (CHAT_MODEL, EMBED_MODEL):
        data = _seed_inputs(model)
        inputs = [json.loads(raw) for raw in data.splitlines()]
        for endpoint in sorted({line["url"] for line in inputs}):
            subset = [line for line in inputs if line["url"] == endpoint]
            done = wait_for(model_client, create(model_client, subset, endpoint=endpoint).id)
            assert done.status == "completed", done.errors
            for server_line in read_lines(model_client, done.output_file_id):
                mine = seed_results[server_line["custom_id"]]
                assert mine["error"] is None and mine["response"]["status_code"] == 200
                assert mine["id"].startswith("batch_req_")
                assert _stable(mine["response"]["body"]) == _stable(server_line["response"]["body"])


def test_stdin_to_stdout_with_malformed_lines(seed_runs):
    """Each bad line gets its error line, in input order (written as it is read), its line number
    in the message (after the first seed line: MALFORMED starts at line 2)."""
    rejected = seed_runs.rejected
    assert [(line["custom_id"], line["error"]["code"]) for line in rejected] == [(i, c) for _, i, c in BAD_LINES]
    assert all(line["response"] is None for line in rejected)
    assert [line["error"]["message"].split(":")[0] for line in rejected] == [
        f"Line {n}" for n in range(2, len(BAD_LINES) + 2)
    ]
    chat_ok, bad = len(_seed_inputs(CHAT_MODEL).splitlines()), len(BAD_LINES)
    assert f"done: {chat_ok + bad} lines (ok {chat_ok}, failed {bad}" in seed_runs.chat_stderr


@pytest.mark.parametrize("backend", ["sqlite"], indirect=True)
def test_the_server_refuses_the_same_bad_lines_with_the_same_codes(seed_runs, model_client):
    """The file run-batch read on stdin, as a batch: validation fails it, one error per bad line,
    each with the code run-batch gave that line (one line contract, app/pipeline/lines.py)."""
    done = wait_for(model_client, create(model_client, MALFORMED).id, timeout=60)
    assert done.status == "failed"
    server = [(error.line, error.code) for error in done.errors.data]
    run_batch = [line["error"]["code"] for line in seed_runs.rejected]
    assert server == [(n, code) for n, (_, _, code) in enumerate(BAD_LINES, 1)]
    assert run_batch == [code for _, code in server]


def test_presigned_get_and_put_with_retries_and_an_error_file(seed_runs):
    assert seed_runs.put_attempts == 3
    assert "too-long" not in seed_runs.results  # the output holds the lines that succeeded
    assert list(seed_runs.staging.iterdir()) == []  # staged output removed after upload
    # Failures go to the error file, OpenAI style: the engine's 400 is a response, not an error.
    (failure,) = seed_runs.errors
    assert failure["custom_id"] == "too-long" and failure["error"] is None
    assert failure["response"]["status_code"] == 400
    assert "maximum context length" in failure["response"]["body"]["error"]["message"]


def test_resume_after_sigkill_writes_each_line_once_and_leaves_no_engine_behind(tmp_path):
    """SIGKILL of run-batch alone (not its group): its engine processes are gone within 10 s.
    --resume then writes every custom_id once, and each invalid-JSON line's error once."""
    total, not_json = 1200, {0, 7, 600, 1199}
    source, out = tmp_path / "in.jsonl", tmp_path / "out.jsonl"
    good = [jsonl([chat_line(f"r{i}", f"question {i}", max_tokens=24)]) for i in range(total)]
    for at in sorted(not_json):  # ascending: each lands at index `at`
        good.insert(at, b"{not json %d\n" % at)
    source.write_bytes(b"".join(good))
    partial = tmp_path / "out.jsonl.partial"
    cmd = _run_batch_cmd(tmp_path / "models", "-i", str(source), "-o", str(out), "--model", CHAT_MODEL)
    proc = subprocess.Popen(cmd, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, start_new_session=True)
    deadline = time.monotonic() + 600
    while not (partial.exists() and partial.read_bytes().count(b"\n") >= 300):
        assert proc.poll() is None and time.monotonic() < deadline, "run-batch ended before it could be killed"
        time.sleep(0.05)
    try:
        kill_alone_and_assert_no_orphans(proc.pid)
    finally:
        with contextlib.suppress(ProcessLookupError):
            os.killpg(proc.pid, signal.SIGKILL)  # never leak engines into the suite
        proc.wait()
    written_before = partial.read_bytes().count(b"\n")
    assert 300 <= written_before < total and not out.exists()
    assert partial.read_bytes().count(b'"invalid_json_line"') >= 2  # input lines 1 and 8 came before

    done = subprocess.run(cmd + ["--resume"], capture_output=True, timeout=600, check=False)
    assert done.returncode == 0, done.stderr.decode()[-3000:]
    lines = [json.loads(raw) for raw in out.read_bytes().splitlines()]
    ids = [line["custom_id"] for line in lines if line["custom_id"] is not None]
    assert len(ids) == total and set(ids) == {f"r{i}" for i in range(total)}
    rejected = [line["error"]["message"] for line in lines if line["custom_id"] is None]
    assert sorted(rejected) == sorted(f"Line {at + 1}: This line is not parseable as valid JSON." for at in not_json)
    assert b"already done before --resume" in done.stderr
    assert not partial.exists()
