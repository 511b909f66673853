"""A background response on a real `batchd serve` with the built-in chat model: vLLM's own
`/v1/responses` serving runs the line, and the `openai` client reads its output and usage."""

from __future__ import annotations

from harness.poll import wait_until
from tests.support.batches import CHAT_MODEL

MAX_OUTPUT_TOKENS = 8


def test_a_background_response_completes_with_the_engines_output(model_client):
    created = model_client.responses.create(
        model=CHAT_MODEL,
        input="Tell me about background responses.",
        max_output_tokens=MAX_OUTPUT_TOKENS,
        temperature=0,
        background=True,
    )
    assert (created.status, created.background, created.output) == ("queued", True, [])

    done = wait_until(
        lambda: (r := model_client.responses.retrieve(created.id)).status not in ("queued", "in_progress") and r,
        timeout=300,
        what=f"response {created.id} to end",
        interval=0.5,
    )
    # The tiny model's gibberish rarely stops on its own: vLLM ends it `incomplete` at the limit.
    assert done.status in ("completed", "incomplete"), done.error
    if done.status == "incomplete":
        assert done.incomplete_details is not None and done.incomplete_details.reason == "max_output_tokens"
    assert (done.id, done.created_at, done.background, done.model) == (created.id, created.created_at, True, CHAT_MODEL)
    assert done.output_text != ""
    assert done.usage is not None and 0 < done.usage.output_tokens <= MAX_OUTPUT_TOKENS
    assert done.usage.input_tokens > 0
