"""After a batch runs on the real engine, /metrics (parsed with prometheus_client's text parser)
agrees with the batch object: lines finished equal its request_counts, tokens its usage."""

from __future__ import annotations

from harness.poll import wait_until
from tests.support.batches import CHAT_MODEL, EMBED_MODEL, create, wait_for
from tests.support.metrics import scrape, value

# An endpoint no other model_server test keeps busy, so the deltas are this batch's alone.
ENDPOINT = "/v1/completions"


def _line(custom_id: str, prompt: str) -> dict:
    return {
        "custom_id": custom_id,
        "method": "POST",
        "url": ENDPOINT,
        "body": {"model": CHAT_MODEL, "prompt": prompt, "max_tokens": 7, "temperature": 0},
    }


def test_counters_match_request_counts_and_usage(model_client, model_server):
    before = scrape(model_server)
    too_long = " ".join(str(i) for i in range(4000))  # a 400 from the engine: a failed line
    lines = [_line(f"ok-{i}", f"Once upon a time {i}") for i in range(6)] + [_line("too-long", too_long)]
    done = wait_for(model_client, create(model_client, lines, endpoint=ENDPOINT).id)
    assert done.status == "completed" and done.request_counts.failed == 1
    after = scrape(model_server)

    def grew(name: str, **labels) -> float:
        return value(after, name, **labels) - value(before, name, **labels)

    counts, usage = done.request_counts, done.usage
    finished = {"model": CHAT_MODEL, "endpoint": ENDPOINT}
    assert grew("batchd_lines_finished_total", **finished, outcome="completed") == counts.completed == 6
    assert grew("batchd_lines_finished_total", **finished, outcome="failed") == counts.failed
    assert grew("batchd_line_latency_seconds_count", **finished) == counts.total
    assert grew("batchd_input_tokens_total", model=CHAT_MODEL) == usage.input_tokens > 0
    assert grew("batchd_output_tokens_total", model=CHAT_MODEL) == usage.output_tokens == 6 * 7
    assert value(after, "batchd_lines_in_flight", model=CHAT_MODEL) == 0
    assert value(after, "batchd_lines_waiting", model=CHAT_MODEL) == 0
    assert value(after, "batchd_engine_up", model=CHAT_MODEL) == 1
    assert value(after, "batchd_engine_up", model=EMBED_MODEL) == 1
    # Batch counts are read at most every BATCHD_METRICS_CACHE_SECONDS (15 s): they may lag.
    wait_until(lambda: value(scrape(model_server), "batchd_batches", status="completed") >= 1, timeout=60)
