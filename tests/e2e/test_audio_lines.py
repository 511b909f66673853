"""Audio lines (vLLM run-batch's format: `file_url`, an http:// or data: URL) through the tiny
Whisper, in process and behind a real `vllm serve` upstream, in batches (official client) and in
`batchd run-batch`: every success body is what that `vllm serve` answers for the same audio sent
to its own route; an unreachable URL, an oversized file and a non-audio file are error lines."""

from __future__ import annotations

import base64
import io
import json
import os
import threading
import wave
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

import httpx
import pytest

from app.engine.config.tiny_whisper import TINY_WHISPER_NAME, build_tiny_whisper_model
from harness.client import openai_client
from harness.health import ADMIN_ENV, health_details
from harness.poll import wait_until
from harness.ports import free_port
from harness.process import ManagedProcess
from harness.server import BATCHD, ServerProcess
from harness.vllm_serve import VllmServer
from tests.conftest import API_KEYS_ENV
from tests.support import head_start
from tests.support.batches import create, jsonl, results_by_custom_id, wait_for
from tests.support.engines import EAGER_FLAG

# A `vllm serve` of whisper, a head start (tests/conftest.py: VLLM_FIXTURES).
pytestmark = pytest.mark.vllm

TRANSCRIPTIONS, TRANSLATIONS = "/v1/audio/transcriptions", "/v1/audio/translations"
UPSTREAM = "whisper-upstream"
# The server's and run-batch's BATCHD_AUDIO_MAX_BYTES: the 1 s tone fits, the 4 s one does not.
MAX_BYTES = 100_000
# Both processes fetch the test audio from a server on 127.0.0.1, which the outbound policy must allow.
AUDIO_ENV = {"BATCHD_AUDIO_MAX_BYTES": str(MAX_BYTES), "BATCHD_OUTBOUND_ALLOW": "127.0.0.1"}
# Each line's decoding settings: the language skips Whisper's detection pass, and a short
# answer is as telling as the ~440 tokens the random weights would babble.
DECODE = {"temperature": 0, "max_completion_tokens": 24}
SETTINGS = {TRANSCRIPTIONS: {"language": "en", **DECODE}, TRANSLATIONS: {"language": "fr", **DECODE}}
# The response bodies of the good lines (custom_id prefixes) and the error lines' reasons.
GOOD = ("data", "http")
BAD = {
    "unreachable": "Could not fetch file_url",
    "oversized-http": "too large",
    "oversized-data": "too large",
    "not-audio": "Invalid or unsupported audio file",
}


def tone(seconds: float, hz: float) -> bytes:
    """A 16 kHz mono 16-bit WAV of a sine tone (Whisper's own sample rate: no resampling)."""
    import numpy as np

    rate = 16_000
    t = np.arange(int(rate * seconds)) / rate
    samples = (0.3 * np.sin(2 * np.pi * hz * t) * 32767).astype("<i2")
    buffer = io.BytesIO()
    with wave.open(buffer, "wb") as out:
        out.setnchannels(1)
        out.setsampwidth(2)
        out.setframerate(rate)
        out.writeframes(samples.tobytes())
    return buffer.getvalue()


FILES = {"/tone.wav": tone(1.0, 440.0), "/long.wav": tone(4.0, 440.0), "/notes.txt": b"not audio at all\n" * 64}
assert len(FILES["/tone.wav"]) < MAX_BYTES < len(FILES["/long.wav"])


class _Files(BaseHTTPRequestHandler):
    def do_GET(self):  # noqa: N802
        data = FILES.get(self.path)
        self.send_response(200 if data is not None else 404)
        self.send_header("Content-Length", str(len(data or b"")))
        self.end_headers()
        self.wfile.write(data or b"")

    def log_message(self, *args):
        pass


def data_url(data: bytes) -> str:
    return "data:audio/wav;base64," + base64.b64encode(data).decode()


def audio_lines(model: str, endpoint: str, files_url: str) -> list[dict]:
    urls = {
        "data": data_url(FILES["/tone.wav"]),
        "http": f"{files_url}/tone.wav",
        "unreachable": f"http://127.0.0.1:{free_port()}/tone.wav",
        "oversized-http": f"{files_url}/long.wav",
        "oversized-data": data_url(FILES["/long.wav"]),
        "not-audio": f"{files_url}/notes.txt",
    }
    kind = endpoint.rsplit("/", 1)[1]
    return [
        {
            "custom_id": f"{name}-{kind}",
            "method": "POST",
            "url": endpoint,
            "body": {"model": model, "file_url": url, **SETTINGS[endpoint]},
        }
        for name, url in urls.items()
    ]


def _launch(work_dir: Path) -> list[VllmServer]:
    work_dir.mkdir(parents=True)
    path = build_tiny_whisper_model(work_dir / TINY_WHISPER_NAME)
    return [VllmServer(work_dir, path, TINY_WHISPER_NAME, ["--max-model-len", "448"]).launch()]


head_start.register(__file__, "vllm-whisper", _launch)


@pytest.fixture(scope="module")
def files_url():
    server = ThreadingHTTPServer(("127.0.0.1", 0), _Files)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    yield f"http://127.0.0.1:{server.server_address[1]}"
    server.shutdown()


@pytest.fixture(scope="module")
def vllm_whisper(head_starts):
    """The head-started `vllm serve`, not yet waited for (see `ready_whisper`)."""
    (server,) = head_starts.take("vllm-whisper")
    try:
        yield server
    finally:
        server.stop()


@pytest.fixture(scope="module")
def ready_whisper(vllm_whisper):
    return vllm_whisper.wait()


@pytest.fixture(scope="module")
def want(ready_whisper) -> dict[str, dict]:
    """`vllm serve`'s own answer to the 1 s tone, by endpoint (multipart, as the OpenAI client sends)."""
    answers = {}
    for endpoint, settings in SETTINGS.items():
        response = httpx.post(
            ready_whisper.url + endpoint.removeprefix("/v1"),
            data={"model": TINY_WHISPER_NAME, **{k: str(v) for k, v in settings.items()}},
            files={"file": ("tone.wav", FILES["/tone.wav"], "audio/wav")},
            timeout=120,
        )
        assert response.status_code == 200, response.text
        answers[endpoint] = response.json()
    assert answers[TRANSCRIPTIONS]["text"]  # a real decode, not an empty answer
    return answers


@pytest.fixture(scope="module")
def run_batch(tmp_path_factory, files_url):
    """`batchd run-batch` over both endpoints' lines, started now: its engine's start overlaps the
    server's. Yields a function that waits for it and returns (result lines by custom_id, stderr)."""
    tmp = tmp_path_factory.mktemp("audio-run-batch")
    lines = audio_lines(TINY_WHISPER_NAME, TRANSCRIPTIONS, files_url) + audio_lines(
        TINY_WHISPER_NAME, TRANSLATIONS, files_url
    )
    (tmp / "in.jsonl").write_bytes(jsonl(lines))
    cmd = [
        str(BATCHD),
        "run-batch",
        "-i",
        str(tmp / "in.jsonl"),
        "-o",
        str(tmp / "out.jsonl"),
        "--error-file",
        str(tmp / "errors.jsonl"),
        "--model",
        TINY_WHISPER_NAME,
        "--data-dir",
        str(tmp / "data"),
        EAGER_FLAG,
    ]
    env = {**os.environ, **AUDIO_ENV}
    process = ManagedProcess(cmd, tmp / "stdout", stderr_path=tmp / "stderr", env=env).start()

    def finish() -> tuple[dict[str, dict], str]:
        assert process.proc is not None
        returncode = process.proc.wait(600)
        stderr = (tmp / "stderr").read_text(errors="replace")
        assert returncode == 0, stderr[-3000:]
        outputs = [(tmp / name).read_bytes() for name in ("out.jsonl", "errors.jsonl")]
        lines = [json.loads(raw) for data in outputs for raw in data.splitlines()]
        return {line["custom_id"]: line for line in lines}, stderr

    try:
        yield finish
    finally:
        process.stop(30)


@pytest.fixture(scope="module")
def batchd(tmp_path_factory, run_batch, vllm_whisper):
    """The tiny Whisper in process, and the `vllm serve` one as an upstream model. Three engines
    start side by side (run-batch's, this server's, `vllm serve`'s): most of a start is a
    single-threaded import chain, so on 2 cores each uses what the others leave idle."""
    config = tmp_path_factory.mktemp("audio-config") / "models.json"
    config.write_text(
        json.dumps(
            {
                "models": {
                    TINY_WHISPER_NAME: {"engine_args": {"enforce_eager": True}},
                    UPSTREAM: {
                        "upstream": {
                            "urls": [vllm_whisper.url],
                            "model": TINY_WHISPER_NAME,
                            "endpoints": [TRANSCRIPTIONS, TRANSLATIONS],
                        }
                    },
                }
            }
        )
    )
    # Launched before the upstream answers: batchd keeps probing a URL until it does.
    server = ServerProcess(
        tmp_path_factory.mktemp("audio-batchd"),
        env={"BATCHD_API_KEYS": API_KEYS_ENV, **AUDIO_ENV, **ADMIN_ENV},
        models=True,
        args=["--model", TINY_WHISPER_NAME, "--config", str(config)],
    ).launch()
    try:
        vllm_whisper.wait()
        server.wait_healthy(600)
        # batchd probes a down URL every few seconds: wait until it has seen this one up.
        wait_until(lambda: '"up"' in json.dumps(health_details(server)), 60, "upstream up")
        yield server
    finally:
        server.stop()


def assert_results(results: dict[str, dict], kind: str, want: dict) -> None:
    """The good lines answered as `vllm serve` answers; each bad one a 400 that says why."""
    for name in GOOD:
        line = results[f"{name}-{kind}"]
        assert line["error"] is None and line["response"]["status_code"] == 200, line
        assert line["response"]["body"] == want
    for name, reason in BAD.items():
        line = results[f"{name}-{kind}"]
        assert line["error"] is None and line["response"]["status_code"] == 400, line
        error = line["response"]["body"]["error"]
        assert reason in error["message"], error


def test_audio_batches_in_process_and_upstream(batchd, files_url, want):
    client = openai_client(batchd.base_url, "key-a")
    batches = {
        (model, endpoint): create(client, audio_lines(model, endpoint, files_url), endpoint=endpoint).id
        for model in (TINY_WHISPER_NAME, UPSTREAM)
        for endpoint in (TRANSCRIPTIONS, TRANSLATIONS)
    }
    for (model, endpoint), batch_id in batches.items():
        batch = wait_for(client, batch_id, timeout=300)
        assert batch.status == "completed", (model, batch)
        assert (batch.request_counts.completed, batch.request_counts.failed) == (len(GOOD), len(BAD))
        output, errors = results_by_custom_id(client, batch)
        assert len(output) == len(GOOD) and len(errors) == len(BAD)
        assert_results({**output, **errors}, endpoint.rsplit("/", 1)[1], want[endpoint])


def test_audio_lines_in_run_batch(run_batch, want):
    results, stderr = run_batch()
    assert len(results) == 2 * (len(GOOD) + len(BAD))
    for endpoint in (TRANSCRIPTIONS, TRANSLATIONS):
        assert_results(results, endpoint.rsplit("/", 1)[1], want[endpoint])
    assert f"ok {2 * len(GOOD)}, failed {2 * len(BAD)}" in stderr


def test_a_bad_file_url_fails_validation(batchd):
    client = openai_client(batchd.base_url, "key-a")
    line = {"model": TINY_WHISPER_NAME, "file_url": "ftp://example.com/a.wav"}
    lines = [{"custom_id": "ftp", "method": "POST", "url": TRANSCRIPTIONS, "body": line}]
    batch = wait_for(client, create(client, lines, endpoint=TRANSCRIPTIONS).id)
    assert batch.status == "failed"
    (error,) = batch.errors.data
    assert error.param == "body.file_url" and "ftp" in error.message
