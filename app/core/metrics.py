"""Prometheus metrics: every metric object batchd exposes at `GET /metrics`, and the one-line
helpers the rest of the code calls to update them.

Names follow Prometheus' conventions (base units, `_total` counters, bounded labels: a model,
an endpoint, a route template, a status; never a batch or file id). They live in their own
registry, not prometheus_client's global one, so vLLM's in-process metrics and ours never clash.
Counters count what this process did since it started; Prometheus' `rate()`/`increase()`
handle the resets of a restart."""

from __future__ import annotations

import bisect
import functools
import time
from collections.abc import Callable, Mapping
from typing import Any

from prometheus_client import CollectorRegistry, Counter, Gauge, Histogram, generate_latest
from prometheus_client.exposition import CONTENT_TYPE_LATEST

from app.core.endpoints import normalize_endpoint
from app.core.statuses import BatchStatus, LineOutcome, WebhookDeliveryStatus

REGISTRY = CollectorRegistry(auto_describe=True)
# Lines take from milliseconds (embeddings) to minutes (long generations on CPU).
LINE_BUCKETS = (0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60, 120, 300, 600)
HTTP_BUCKETS = (0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60)

BATCHES = Gauge(
    "batchd_batches", "Batches by status (read from the database at scrape).", ["status"], registry=REGISTRY
)
LINES_FINISHED = Counter(
    "batchd_lines_finished",
    "Batch lines finished, by outcome (completed | failed).",
    ["model", "endpoint", "outcome"],
    registry=REGISTRY,
)
INPUT_TOKENS = Counter("batchd_input_tokens", "Input (prompt) tokens of finished lines.", ["model"], registry=REGISTRY)
OUTPUT_TOKENS = Counter(
    "batchd_output_tokens", "Output (completion) tokens of finished lines.", ["model"], registry=REGISTRY
)
LINE_LATENCY = Histogram(
    "batchd_line_latency_seconds",
    "Engine time of one batch line.",
    ["model", "endpoint"],
    buckets=LINE_BUCKETS,
    registry=REGISTRY,
)
# A background response or flex request, created to ended: well under a second to an hour.
SINGLE_REQUEST_BUCKETS = (0.5, 1, 2, 5, 10, 30, 60, 300, 900, 3600)
SINGLE_REQUEST_SECONDS = Histogram(
    "batchd_single_request_seconds",
    "A background response's or flex request's time from create to its end (whole seconds), by lane "
    "(response | flex) and ending (completed | cancelled | expired).",
    ["lane", "ending"],
    buckets=SINGLE_REQUEST_BUCKETS,
    registry=REGISTRY,
)
LINES_WAITING = Gauge(
    "batchd_lines_waiting", "Lines read and waiting for an engine slot.", ["model"], registry=REGISTRY
)
LINES_IN_FLIGHT = Gauge("batchd_lines_in_flight", "Lines running in the engine.", ["model"], registry=REGISTRY)
BATCHES_AT_RISK = Gauge(
    "batchd_batches_at_risk",
    "Running batches projected to miss their deadline at their fair share (each replica's view).",
    ["model"],
    registry=REGISTRY,
)
ENGINE_UP = Gauge("batchd_engine_up", "1 while the model's engine is ready, 0 otherwise.", ["model"], registry=REGISTRY)
ENGINE_RESTARTS = Counter(
    "batchd_engine_restarts",
    "Restarts of a model's in-process engine after its core process died.",
    ["model"],
    registry=REGISTRY,
)
LINES_QUARANTINED = Counter(
    "batchd_lines_quarantined",
    "Lines failed with engine_crashed: in flight at two deaths of their model's engine, never run again.",
    ["model"],
    registry=REGISTRY,
)
SUSPECT_LINES = Gauge(
    "batchd_engine_suspect_lines",
    "Lines in flight at one death of the model's engine, still to run again (one at a time).",
    ["model"],
    registry=REGISTRY,
)
ENGINE_LOADS = Counter(
    "batchd_engine_loads",
    "Engines loaded on demand (--max-resident-engines, load: on-demand), by model.",
    ["model"],
    registry=REGISTRY,
)
ENGINE_LOAD_SECONDS = Histogram(
    "batchd_engine_load_seconds",
    "Time to load a model's engine on demand.",
    ["model"],
    buckets=(1, 2.5, 5, 10, 20, 30, 60, 120, 300, 600),
    registry=REGISTRY,
)
ENGINE_RESIDENT = Gauge(
    "batchd_engine_resident",
    "1 while the model has an engine loaded (or loading), 0 while it waits to be loaded on demand.",
    ["model"],
    registry=REGISTRY,
)
ENGINE_SWAPS = Counter(
    "batchd_engine_swaps",
    "Swaps the residency plan made (--max-resident-engines), by reason: room (a load in a free "
    "place), drained (in place of an idle engine), at_risk, due_earlier, turn (in place of a busy one).",
    ["reason"],
    registry=REGISTRY,
)
ENGINE_UNLOADS = Counter(
    "batchd_engine_unloads",
    "Engines unloaded for another model (--max-resident-engines), by model and the swap's reason.",
    ["model", "reason"],
    registry=REGISTRY,
)
NO_ENGINE_LOADED_SECONDS = Counter(
    "batchd_engine_none_loaded_seconds",
    "Seconds with no in-process engine loaded, between an unload and the next load (engines on demand).",
    registry=REGISTRY,
)
UPLOAD_BYTES = Counter("batchd_upload_bytes", "Bytes of files stored by uploads.", registry=REGISTRY)
HTTP_REQUESTS = Counter(
    "batchd_http_requests",
    "HTTP requests by route template and status.",
    ["method", "route", "status"],
    registry=REGISTRY,
)
HTTP_DURATION = Histogram(
    "batchd_http_request_duration_seconds",
    "HTTP request latency by route template.",
    ["method", "route"],
    buckets=HTTP_BUCKETS,
    registry=REGISTRY,
)
LEASE_TAKEOVERS = Counter(
    "batchd_lease_takeovers", "Claims that took an expired lease from another worker.", registry=REGISTRY
)
WEBHOOK_DELIVERIES = Counter(
    "batchd_webhook_deliveries", "Webhook delivery attempts (delivered | failed).", ["outcome"], registry=REGISTRY
)

UNMATCHED_ROUTE = "<unmatched>"
_METHODS = {"GET", "POST", "PUT", "PATCH", "DELETE", "HEAD", "OPTIONS"}


def _model_label(model: object) -> str:
    # Lines reach the engine only after validation named a served model; anything else is one
    # bucket, so a stray body can never mint a new series.
    return model if isinstance(model, str) and len(model) <= 256 else "<unknown>"


@functools.lru_cache(maxsize=4096)
def _series(metric, *labels: str):
    """A labelled series, looked up once: `labels()` validates and takes a lock on every call."""
    return metric.labels(*labels)


# What batch lines do is tallied here in plain numbers, by label values, and folded into the
# metrics above at scrape (fold_line_tallies): six locked updates and series lookups a line were
# a tenth of W8-layers' executor layer. Every line runs on the event loop's thread; a scrape only
# reads these.
_in_flight: dict[str, int] = {}  # model -> lines running in the engine
_waiting: dict[str, int] = {}  # model -> lines waiting for a slot
_finished: dict[tuple[str, str, str], int] = {}  # (model, endpoint, outcome) -> lines
_input_tokens: dict[str, int] = {}
_output_tokens: dict[str, int] = {}
# (model, endpoint) -> lines per LINE_BUCKETS bucket (not cumulative; +Inf last), then their seconds
_latency: dict[tuple[str, str], list[float]] = {}
# What fold_line_tallies already added, by metric and key.
_folded: dict[tuple[Counter, object], int] = {}
_folded_latency: dict[tuple[str, str], list[float]] = {}


@functools.lru_cache(maxsize=256)
def _endpoint_label(url: str) -> str:
    return normalize_endpoint(url) or "<unknown>"


def line_waiting(model: object, change: int) -> None:
    """A line starts (+1) or stops (-1) waiting for an engine slot."""
    label = _model_label(model)
    _waiting[label] = _waiting.get(label, 0) + change


def line_started(model: object) -> float:
    """A line's engine call starts; give what this returns to :func:`line_ended`."""
    label = _model_label(model)
    _in_flight[label] = _in_flight.get(label, 0) + 1
    return time.perf_counter()


def line_ended(model: object, url: str, started: float) -> None:
    """A line's engine call ended (with a result or not): in-flight gauge and latency histogram."""
    seconds = time.perf_counter() - started
    label = _model_label(model)
    _in_flight[label] -= 1
    key = (label, _endpoint_label(url))
    tally = _latency.get(key)
    if tally is None:
        tally = _latency[key] = [0.0] * (len(LINE_BUCKETS) + 2)
    tally[bisect.bisect_left(LINE_BUCKETS, seconds)] += 1  # the first bucket whose bound >= seconds
    tally[-1] += seconds


def record_line(model: object, url: str, ok: bool, usage: object) -> None:
    """A line finished with a result (what the checkpoint records)."""
    label = _model_label(model)
    key = (label, _endpoint_label(url), LineOutcome.COMPLETED if ok else LineOutcome.FAILED)
    _finished[key] = _finished.get(key, 0) + 1
    _input_tokens[label] = _input_tokens.get(label, 0) + (getattr(usage, "input_tokens", 0) or 0)
    _output_tokens[label] = _output_tokens.get(label, 0) + (getattr(usage, "output_tokens", 0) or 0)


def _fold_counter(metric: Counter, tallies: Mapping[Any, int], labels: Callable[[Any], tuple[str, ...]]) -> None:
    for key, total in list(tallies.items()):
        series = _series(metric, *labels(key))  # made at the first line, even at zero, as before
        added = total - _folded.get((metric, key), 0)
        if added:
            series.inc(added)
            _folded[(metric, key)] = total


def fold_line_tallies() -> None:
    """Bring the line metrics up to date with the tallies (at scrape)."""
    for gauge, tallies in ((LINES_IN_FLIGHT, _in_flight), (LINES_WAITING, _waiting)):
        for label, count in list(tallies.items()):
            _series(gauge, label).set(count)
    _fold_counter(LINES_FINISHED, _finished, lambda key: key)
    _fold_counter(INPUT_TOKENS, _input_tokens, lambda key: (key,))
    _fold_counter(OUTPUT_TOKENS, _output_tokens, lambda key: (key,))
    for key, tally in list(_latency.items()):
        histogram = _series(LINE_LATENCY, *key)
        before = _folded_latency.get(key) or [0.0] * len(tally)
        # prometheus_client's own per-bucket values (what observe() adds to): there is no public
        # way to add a count of observations at once.
        for bucket, (now, then) in enumerate(zip(tally[:-1], before[:-1], strict=True)):
            if now != then:
                histogram._buckets[bucket].inc(now - then)
        if tally[-1] != before[-1]:
            histogram._sum.inc(tally[-1] - before[-1])
        _folded_latency[key] = list(tally)


def record_upload(nbytes: int) -> None:
    UPLOAD_BYTES.inc(nbytes)


def record_lease_takeover() -> None:
    LEASE_TAKEOVERS.inc()


def record_webhook_delivery(delivered: bool) -> None:
    WEBHOOK_DELIVERIES.labels(WebhookDeliveryStatus.DELIVERED if delivered else WebhookDeliveryStatus.FAILED).inc()


def set_batch_counts(counts: dict[BatchStatus, int]) -> None:
    for status in BatchStatus:
        BATCHES.labels(status).set(counts.get(status, 0))


_at_risk_models: set[str] = set()


def set_batches_at_risk(counts: dict[str, int]) -> None:
    """Models absent from `counts` that had a series go back to zero."""
    labels = {_model_label(model): count for model, count in counts.items()}
    for model in _at_risk_models | set(labels):
        BATCHES_AT_RISK.labels(model).set(labels.get(model, 0))
    _at_risk_models.update(labels)


def set_engines_up(states: dict[str, bool]) -> None:
    for model, up in states.items():
        ENGINE_UP.labels(model).set(1 if up else 0)


def record_engine_restart(model: str) -> None:
    ENGINE_RESTARTS.labels(_model_label(model)).inc()


def record_line_quarantined(model: str) -> None:
    LINES_QUARANTINED.labels(_model_label(model)).inc()


def set_suspect_lines(model: str, lines: int) -> None:
    SUSPECT_LINES.labels(_model_label(model)).set(lines)


def record_engine_load(model: str, seconds: float) -> None:
    label = _model_label(model)
    ENGINE_LOADS.labels(label).inc()
    ENGINE_LOAD_SECONDS.labels(label).observe(seconds)


def record_engine_swap(reason: str) -> None:
    ENGINE_SWAPS.labels(reason).inc()


def record_engine_unload(model: str, reason: str) -> None:
    ENGINE_UNLOADS.labels(_model_label(model), reason).inc()


def add_no_engine_loaded_seconds(seconds: float) -> None:
    NO_ENGINE_LOADED_SECONDS.inc(max(0.0, seconds))


def set_engine_resident(model: str, resident: bool) -> None:
    ENGINE_RESIDENT.labels(_model_label(model)).set(1 if resident else 0)


def record_http_request(method: str, route: str | None, status: int, seconds: float) -> None:
    """One HTTP request, by route template (never the raw path: ids must not become labels)."""
    method = method if method in _METHODS else "OTHER"
    _series(HTTP_REQUESTS, method, route or UNMATCHED_ROUTE, str(status)).inc()
    _series(HTTP_DURATION, method, route or UNMATCHED_ROUTE).observe(seconds)


def exposition() -> tuple[bytes, str]:
    """The text format body and its content type."""
    fold_line_tallies()
    return generate_latest(REGISTRY), CONTENT_TYPE_LATEST
