"""The real engine's schema check at validation: a chat body vLLM's request model refuses is the
line's `invalid_request`, with the field as its param (the rest of validation runs on the fake
engine: tests/domains/batches/test_batch_validation.py)."""

from __future__ import annotations

from tests.support.batches import chat_line, create, wait_for


def test_a_body_the_engine_refuses_is_invalid_request(model_client):
    bad = chat_line("b")
    bad["body"]["messages"] = "not a list"
    done = wait_for(model_client, create(model_client, [chat_line("a"), bad]).id, timeout=60)
    assert done.status == "failed" and done.request_counts.completed == 0
    first = done.errors.data[0]
    assert (first.code, first.line, first.param) == ("invalid_request", 2, "body.messages"), first
