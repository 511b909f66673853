"""OpenTelemetry traces, configured by the standard ``OTEL_*`` environment variables.

Off unless an exporter is set (``OTEL_EXPORTER_OTLP_ENDPOINT``, ``OTEL_EXPORTER_OTLP_TRACES_ENDPOINT``
or ``OTEL_TRACES_EXPORTER``), and off costs nothing: the SDK is not even imported, and every hook
below returns at its first test of ``_tracer``.

One trace per batch: the create request's span context is stored on the batch row as a W3C
``traceparent``, and every replica that validates, runs a shard or finalizes the batch starts its
span under it, so the steps join one trace whichever process takes them. A batch without one (made
while tracing was off) gets a trace id derived from its id. A sampled share of lines
(``BATCHD_TRACE_LINE_SAMPLE``) gets a span of its own, whose ``traceparent`` goes with the line's
upstream request, so vLLM's request span joins the batch's trace."""

from __future__ import annotations

import hashlib
import logging
import os
import random
from collections.abc import Iterator, Mapping
from contextlib import AbstractContextManager, contextmanager, nullcontext
from contextvars import ContextVar
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from opentelemetry.trace import Span, Tracer

SERVICE_NAME = "batchd"
# The traceparent of the sampled line running in this task, for its upstream request.
_line_traceparent: ContextVar[str | None] = ContextVar("batchd_line_traceparent", default=None)
_NO_SPAN: AbstractContextManager[None] = nullcontext()

_tracer: Tracer | None = None
_line_sample = 0.0


def exporter_configured(env: Mapping[str, str] = os.environ) -> bool:
    """Whether the environment asks for traces (the SDK's own variables, nothing of batchd's)."""
    if env.get("OTEL_SDK_DISABLED", "").strip().lower() == "true":
        return False
    exporter = env.get("OTEL_TRACES_EXPORTER", "").strip().lower()
    if exporter:
        return exporter != "none"
    return bool(env.get("OTEL_EXPORTER_OTLP_ENDPOINT") or env.get("OTEL_EXPORTER_OTLP_TRACES_ENDPOINT"))


def configure(replica_id: str, line_sample: float) -> bool:
    """Install the tracer provider if the environment asks for traces; whether it did. Sampler,
    batch processor, endpoint, headers and resource come from the ``OTEL_*`` variables."""
    global _tracer, _line_sample
    if not exporter_configured():
        return False
    from opentelemetry import trace
    from opentelemetry.sdk.resources import Resource
    from opentelemetry.sdk.trace import TracerProvider
    from opentelemetry.sdk.trace.export import BatchSpanProcessor, ConsoleSpanExporter, SpanExporter

    exporter: SpanExporter
    if os.environ.get("OTEL_TRACES_EXPORTER", "").strip().lower() == "console":
        exporter = ConsoleSpanExporter()
    else:
        # OTLP over HTTP/protobuf (the collector's port 4318); the variables name the endpoint.
        from opentelemetry.exporter.otlp.proto.http.trace_exporter import OTLPSpanExporter

        exporter = OTLPSpanExporter()
    attributes = {"service.instance.id": replica_id}
    if not os.environ.get("OTEL_SERVICE_NAME"):
        attributes["service.name"] = SERVICE_NAME
    provider = TracerProvider(resource=Resource.create(attributes))
    provider.add_span_processor(BatchSpanProcessor(exporter))
    trace.set_tracer_provider(provider)
    _tracer = provider.get_tracer("batchd")
    _line_sample = line_sample
    _install_log_field()
    return True


def enabled() -> bool:
    return _tracer is not None


def instrument_app(app: Any) -> None:
    """A server span per API request (health and metrics polls aside)."""
    if _tracer is None:
        return
    from opentelemetry.instrumentation.fastapi import FastAPIInstrumentor

    FastAPIInstrumentor.instrument_app(app, excluded_urls="health,metrics", exclude_spans=["receive", "send"])


def request_traceparent(**attributes: str) -> str | None:
    """The current request span's traceparent, to store on the batch it creates (None when off);
    ``attributes`` (the batch id, its project) go on that span."""
    if _tracer is None:
        return None
    from opentelemetry import trace

    span = trace.get_current_span()
    context = span.get_span_context()
    if not context.is_valid:
        return None
    for key, value in attributes.items():
        span.set_attribute(f"batchd.{key}", value)
    return _format(context.trace_id, context.span_id, int(context.trace_flags))


def _format(trace_id: int, span_id: int, flags: int) -> str:
    return f"00-{trace_id:032x}-{span_id:016x}-{flags:02x}"


def derived_traceparent(batch_id: str) -> str:
    """A batch's trace when its row holds none: the same on every replica, sampled."""
    digest = hashlib.sha256(batch_id.encode()).digest()
    return _format(int.from_bytes(digest[:16]), int.from_bytes(digest[16:24]), 1)


@contextmanager
def _batch_step(name: str, traceparent: str | None, batch_id: str, attributes: dict[str, Any]) -> Iterator[Span]:
    from opentelemetry.trace.propagation.tracecontext import TraceContextTextMapPropagator

    assert _tracer is not None
    parent = TraceContextTextMapPropagator().extract({"traceparent": traceparent or derived_traceparent(batch_id)})
    attributes = {"batchd.batch_id": batch_id, **{f"batchd.{k}": v for k, v in attributes.items() if v is not None}}
    with _tracer.start_as_current_span(name, context=parent, attributes=attributes) as span:
        yield span


def batch_span(
    name: str, traceparent: str | None, batch_id: str, **attributes: Any
) -> AbstractContextManager[Span | None]:
    """A span of one step of a batch (``batchd.validate``, ``batchd.shard``, ``batchd.finalize``)
    in the batch's trace; the span (to add attributes to) or None when tracing is off."""
    if _tracer is None:
        return _NO_SPAN
    return _batch_step(name, traceparent, batch_id, attributes)


def set_attributes(span: Span | None, **attributes: Any) -> None:
    if span is not None:
        for key, value in attributes.items():
            if value is not None:
                span.set_attribute(f"batchd.{key}", value)


@contextmanager
def _line(line_no: int, custom_id: str | None, url: str) -> Iterator[None]:
    from opentelemetry.trace import format_span_id, format_trace_id

    assert _tracer is not None
    with _tracer.start_as_current_span(
        "batchd.line", attributes={"batchd.line": line_no, "batchd.custom_id": custom_id or "", "batchd.url": url}
    ) as span:
        context = span.get_span_context()
        token = _line_traceparent.set(
            f"00-{format_trace_id(context.trace_id)}-{format_span_id(context.span_id)}-{int(context.trace_flags):02x}"
        )
        try:
            yield
        finally:
            _line_traceparent.reset(token)


def line_span(line_no: int, custom_id: str | None, url: str) -> AbstractContextManager[None]:
    """A span for a sampled share of lines (``BATCHD_TRACE_LINE_SAMPLE``), under the shard's."""
    if _tracer is None or random.random() >= _line_sample:
        return _NO_SPAN
    return _line(line_no, custom_id, url)


def with_trace_headers(headers: dict[str, str]) -> dict[str, str]:
    """``headers`` plus the running line's ``traceparent`` when it is sampled (the same dict
    otherwise), so the upstream's request span joins the batch's trace."""
    traceparent = _line_traceparent.get()
    if traceparent is None:
        return headers
    return {**headers, "traceparent": traceparent}


class _TraceIdField(logging.Filter):
    """Adds ``trace_id`` to every log record (``-`` outside a span)."""

    def filter(self, record: logging.LogRecord) -> bool:
        from opentelemetry import trace

        context = trace.get_current_span().get_span_context()
        record.trace_id = f"{context.trace_id:032x}" if context.is_valid else "-"
        return True


def _install_log_field() -> None:
    """Log lines carry the trace id: the field on the root handlers, and in their format."""
    for handler in logging.getLogger().handlers:
        handler.addFilter(_TraceIdField())
        formatter = handler.formatter
        if formatter is not None and formatter._fmt and "%(trace_id)s" not in formatter._fmt:
            handler.setFormatter(
                logging.Formatter(formatter._fmt.replace("%(message)s", "trace=%(trace_id)s %(message)s"))
            )
