"""app/core/tracing.py without a server: when the environment turns traces on, and that, off,
no OpenTelemetry module is even imported by the server (tests/e2e/test_traces.py and
tests/e2e/test_upstream_vllm.py check the traces themselves)."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from app.core import tracing


@pytest.mark.parametrize(
    ("env", "on"),
    [
        ({}, False),
        ({"OTEL_EXPORTER_OTLP_ENDPOINT": "http://collector:4318"}, True),
        ({"OTEL_EXPORTER_OTLP_TRACES_ENDPOINT": "http://collector:4318/v1/traces"}, True),
        ({"OTEL_TRACES_EXPORTER": "console"}, True),
        ({"OTEL_TRACES_EXPORTER": "none", "OTEL_EXPORTER_OTLP_ENDPOINT": "http://collector:4318"}, False),
        ({"OTEL_SDK_DISABLED": "true", "OTEL_EXPORTER_OTLP_ENDPOINT": "http://collector:4318"}, False),
    ],
)
def test_the_otel_variables_turn_traces_on(env, on):
    assert tracing.exporter_configured(env) is on


def test_a_batch_without_a_stored_context_gets_the_same_trace_on_every_replica():
    first = tracing.derived_traceparent("batch_abc")
    assert first == tracing.derived_traceparent("batch_abc") != tracing.derived_traceparent("batch_abd")
    version, trace_id, span_id, flags = first.split("-")
    assert (version, len(trace_id), len(span_id), flags) == ("00", 32, 16, "01")


def test_off_the_server_imports_no_opentelemetry_and_adds_no_header():
    code = (
        "import sys\n"
        "from app.core.config import Settings\n"
        "from app.http.app import create_app\n"
        "import app.worker.runner, app.engine.upstream.transport\n"
        "from app.core import tracing\n"
        "assert not tracing.configure('r', 1.0)\n"
        "create_app(Settings(api_only=True))\n"
        "headers = {'a': 'b'}\n"
        "assert tracing.with_trace_headers(headers) is headers\n"
        "with tracing.line_span(1, 'x', '/v1/embeddings'):\n"
        "    pass\n"
        "print(sorted(m for m in sys.modules if m.startswith('opentelemetry')))\n"
    )
    env = {k: v for k, v in os.environ.items() if not k.startswith("OTEL_")}
    root = Path(__file__).resolve().parents[2]
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env=env, cwd=root, timeout=120)
    assert out.returncode == 0, out.stderr
    assert out.stdout.strip() == "[]"
