"""The session's real `vllm serve` pair (the tiny chat model, and MiniLM with the pooling runner),
shared by the tests that put batchd in front of vLLM's own server: they start for about a minute
and a half, so once a session, with a head start (tests/support/head_start.py). A test module
that uses the `vllm_servers` fixture calls `register(__file__)` at import."""

from __future__ import annotations

from pathlib import Path

from app.engine.config.catalog import _minilm_path
from app.engine.config.tiny_chat import build_tiny_chat_model
from harness.vllm_serve import VllmServer
from tests.support import head_start
from tests.support.batches import CHAT_MODEL, EMBED_MODEL
from tests.support.otlp import shared_receiver

NAME = "vllm-upstreams"


def _launch(work_dir: Path) -> list[VllmServer]:
    work_dir.mkdir(parents=True)
    chat_path = build_tiny_chat_model(work_dir / CHAT_MODEL)
    # vLLM's own exporter speaks gRPC unless told otherwise.
    tracing = ["--otlp-traces-endpoint", shared_receiver().traces_endpoint]
    tracing_env = {
        "OTEL_EXPORTER_OTLP_TRACES_PROTOCOL": "http/protobuf",
        "OTEL_SERVICE_NAME": "vllm",
        "OTEL_BSP_SCHEDULE_DELAY": "100",
    }
    chat_flags = ["--max-num-seqs", "16", "--max-model-len", "2048", *tracing]
    return [
        VllmServer(work_dir, chat_path, CHAT_MODEL, chat_flags, env=tracing_env).launch(),
        VllmServer(work_dir, _minilm_path(), EMBED_MODEL, ["--runner", "pooling"]).launch(),
    ]


def register(test_file: str) -> None:
    head_start.register(test_file, NAME, _launch)
