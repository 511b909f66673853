"""An OTLP/HTTP trace receiver inside the test process (what a collector's port 4318 does): it
decodes each export with opentelemetry-proto and keeps the spans. One for the whole session:
servers started at different times (the head-started `vllm serve`, the model servers) send to it,
and tests pick their batch's trace out by its attributes."""

from __future__ import annotations

import gzip
import threading
from dataclasses import dataclass
from functools import cache
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import (
    ExportTraceServiceRequest,
    ExportTraceServiceResponse,
)
from opentelemetry.proto.common.v1.common_pb2 import AnyValue

from harness.poll import wait_until


@dataclass(frozen=True)
class Span:
    service: str
    name: str
    trace_id: str
    span_id: str
    parent_id: str
    attributes: dict


def _value(value: AnyValue):
    kind = value.WhichOneof("value")
    return getattr(value, kind) if kind else None


class OtlpReceiver:
    def __init__(self) -> None:
        self.spans: list[Span] = []
        self._lock = threading.Lock()
        receiver = self

        class Handler(BaseHTTPRequestHandler):
            def do_POST(self) -> None:
                body = self.rfile.read(int(self.headers.get("Content-Length", 0)))
                if self.headers.get("Content-Encoding") == "gzip":
                    body = gzip.decompress(body)
                receiver._add(ExportTraceServiceRequest.FromString(body))
                answer = ExportTraceServiceResponse().SerializeToString()
                self.send_response(200)
                self.send_header("Content-Type", "application/x-protobuf")
                self.send_header("Content-Length", str(len(answer)))
                self.end_headers()
                self.wfile.write(answer)

            def log_message(self, *args) -> None:
                pass

        self._server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        threading.Thread(target=self._server.serve_forever, daemon=True, name="otlp-receiver").start()

    @property
    def endpoint(self) -> str:
        """For OTEL_EXPORTER_OTLP_ENDPOINT (the exporter appends /v1/traces)."""
        return f"http://127.0.0.1:{self._server.server_address[1]}"

    @property
    def traces_endpoint(self) -> str:
        return self.endpoint + "/v1/traces"

    def server_env(self) -> dict[str, str]:
        """A batchd server exporting here, every 100 ms (the SDK's default waits 5 s)."""
        return {"OTEL_EXPORTER_OTLP_ENDPOINT": self.endpoint, "OTEL_BSP_SCHEDULE_DELAY": "100"}

    def _add(self, request: ExportTraceServiceRequest) -> None:
        spans = []
        for resource_spans in request.resource_spans:
            resource = {a.key: _value(a.value) for a in resource_spans.resource.attributes}
            for scope_spans in resource_spans.scope_spans:
                for span in scope_spans.spans:
                    spans.append(
                        Span(
                            service=str(resource.get("service.name", "")),
                            name=span.name,
                            trace_id=span.trace_id.hex(),
                            span_id=span.span_id.hex(),
                            parent_id=span.parent_span_id.hex(),
                            attributes={a.key: _value(a.value) for a in span.attributes},
                        )
                    )
        with self._lock:
            self.spans.extend(spans)

    def trace(self, trace_id: str) -> list[Span]:
        with self._lock:
            return [span for span in self.spans if span.trace_id == trace_id]

    def batch_trace(self, batch_id: str, timeout: float = 30) -> list[Span]:
        """The spans of the batch's trace, once its finalize span has arrived."""

        def finalize() -> Span | None:
            with self._lock:
                return next(
                    (
                        s
                        for s in self.spans
                        if s.name == "batchd.finalize" and s.attributes["batchd.batch_id"] == batch_id
                    ),
                    None,
                )

        span = wait_until(finalize, timeout=timeout, what=f"the finalize span of {batch_id}")
        return self.trace(span.trace_id)


@cache
def shared_receiver() -> OtlpReceiver:
    return OtlpReceiver()


def check_batch_trace(spans: list[Span], batch_id: str, project: str, model: str) -> dict[str, list[Span]]:
    """Assert the trace holds the batch's create request and its validate, shard and finalize
    spans, children of that request's span, with the batch's attributes; the spans by name."""
    by_name: dict[str, list[Span]] = {}
    for span in spans:
        by_name.setdefault(span.name, []).append(span)
    (create,) = [s for s in spans if s.name == "POST /v1/batches" or s.name == "POST /v1/messages/batches"]
    assert create.attributes["batchd.batch_id"] == batch_id and create.attributes["batchd.project"] == project
    attrs = create.attributes
    assert attrs.get("http.response.status_code", attrs.get("http.status_code")) == 200
    steps = by_name["batchd.validate"] + by_name["batchd.shard"] + by_name["batchd.finalize"]
    for step in steps:
        assert step.parent_id == create.span_id, step
        assert step.attributes["batchd.batch_id"] == batch_id and step.attributes["batchd.project"] == project
        assert step.attributes["batchd.replica"]
    (validate,) = by_name["batchd.validate"]
    assert validate.attributes["batchd.model"] == model and validate.attributes["batchd.errors"] == 0
    for shard in by_name["batchd.shard"]:
        assert shard.attributes["batchd.model"] == model and shard.attributes["batchd.retries"] == 0
        assert shard.attributes["batchd.outcome"] == "done"
    assert sum(s.attributes["batchd.lines"] for s in by_name["batchd.shard"]) == validate.attributes["batchd.lines"]
    (finalize,) = by_name["batchd.finalize"]
    assert finalize.attributes["batchd.ending"] == "completed" and finalize.attributes["batchd.model"] == model
    return by_name
