"""Traces of a batch run by the in-process engine (the shared model server exports to the
session's OTLP receiver): one trace holds the create request and the batch's validate, shard and
finalize spans, and every API request has a span. The upstream side (vLLM's request spans joining
the trace through `traceparent`) is in tests/e2e/test_upstream_vllm.py."""

from __future__ import annotations

from tests.support.batches import EMBED_MODEL, create, embedding_line, wait_for
from tests.support.otlp import check_batch_trace, shared_receiver


def test_an_in_process_batch_is_one_trace(model_client):
    lines = [embedding_line(f"e-{i}", f"sentence number {i}") for i in range(3)]
    batch = wait_for(model_client, create(model_client, lines, endpoint="/v1/embeddings").id, timeout=120)
    assert batch.status == "completed"
    receiver = shared_receiver()
    spans = receiver.batch_trace(batch.id)
    assert {span.service for span in spans} == {"batchd"}
    by_name = check_batch_trace(spans, batch.id, "proj-a", EMBED_MODEL)
    assert sum(s.attributes["batchd.lines"] for s in by_name["batchd.shard"]) == 3
    # Each API request has its own span (the polls of this batch, outside its trace).
    polls = [s for s in receiver.spans if s.name == "GET /v1/batches/{batch_id}"]
    assert polls and all(s.trace_id != spans[0].trace_id for s in polls)
