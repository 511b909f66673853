"""Line metrics are tallied in plain numbers and folded into the Prometheus metrics at scrape:
the values at GET /metrics are what updating the metrics per line gave."""

from __future__ import annotations

from app.core import metrics
from app.engine.results import Usage

MODEL = "tally-test-model"
URL = "/v1/chat/completions"


def _sample(name: str, **labels: str) -> float | None:
    metrics.exposition()
    return metrics.REGISTRY.get_sample_value(name, labels)


def test_lines_fold_into_the_metrics_at_scrape():
    metrics.line_waiting(MODEL, +1)
    metrics.line_waiting(MODEL, +1)
    metrics.line_waiting(MODEL, -1)
    first = metrics.line_started(MODEL)
    second = metrics.line_started(MODEL)
    assert _sample("batchd_lines_waiting", model=MODEL) == 1
    assert _sample("batchd_lines_in_flight", model=MODEL) == 2

    # 1.5 s ago: between the 1 s and 2.5 s bounds with a second of room for a stalled host.
    metrics.line_ended(MODEL, URL, first - 1.5)
    metrics.record_line(MODEL, URL, True, Usage(input_tokens=5, output_tokens=7))
    latency = {"model": MODEL, "endpoint": URL}
    assert _sample("batchd_lines_in_flight", model=MODEL) == 1
    assert _sample("batchd_line_latency_seconds_bucket", le="1.0", **latency) == 0
    assert _sample("batchd_line_latency_seconds_bucket", le="2.5", **latency) == 1
    assert _sample("batchd_line_latency_seconds_bucket", le="+Inf", **latency) == 1
    assert _sample("batchd_line_latency_seconds_count", **latency) == 1
    assert 1.5 <= (_sample("batchd_line_latency_seconds_sum", **latency) or 0) < 2.5

    metrics.line_ended(MODEL, "/chat/completions", second - 1000)  # Azure-style URL, past every bound
    metrics.record_line(MODEL, URL, False, Usage())
    for _ in range(2):  # a second scrape adds nothing
        assert _sample("batchd_lines_in_flight", model=MODEL) == 0
        assert _sample("batchd_line_latency_seconds_bucket", le="600.0", **latency) == 1
        assert _sample("batchd_line_latency_seconds_bucket", le="+Inf", **latency) == 2
        assert (_sample("batchd_line_latency_seconds_sum", **latency) or 0) > 1000
        assert _sample("batchd_lines_finished_total", outcome="completed", **latency) == 1
        assert _sample("batchd_lines_finished_total", outcome="failed", **latency) == 1
        assert _sample("batchd_input_tokens_total", model=MODEL) == 5
        assert _sample("batchd_output_tokens_total", model=MODEL) == 7


def test_a_stray_model_is_one_series():
    metrics.record_line(["not", "a", "name"], URL, True, Usage())
    metrics.record_line("x" * 300, URL, True, Usage())
    unknown = {"model": "<unknown>", "endpoint": URL, "outcome": "completed"}
    assert (_sample("batchd_lines_finished_total", **unknown) or 0) >= 2
    assert _sample("batchd_input_tokens_total", model="<unknown>") is not None  # made at zero, as before
