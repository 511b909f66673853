"""Validation of a Message Batch's input (app/pipeline/validation.py, `per_request`): bodies are
not checked before running, as Anthropic checks each request's params only as it runs."""

from __future__ import annotations

import asyncio
import json

from app.engine.results import MODEL_NOT_FOUND, LineProblem
from app.pipeline.validation import validate_input_file

SERVED = "batchd-tiny-chat"


class _Checker:
    def validate_line(self, endpoint, body):
        return None if body.get("model") == SERVED else LineProblem(MODEL_NOT_FOUND, "not served", "body.model")

    def lines_pass(self, endpoint, model, bodies):
        return all(self.validate_line(endpoint, body) is None for body in bodies)


async def _chunks(bodies):
    for i, body in enumerate(bodies):
        line = {"custom_id": f"r{i}", "method": "POST", "url": "/v1/messages", "body": body}
        yield json.dumps(line).encode() + b"\n"


def _validate(bodies, per_request):
    return asyncio.run(
        validate_input_file(
            _chunks(bodies),
            "/v1/messages",
            _Checker(),
            max_lines=100,
            max_errors=10,
            shard_lines=2,
            per_request=per_request,
        )
    )


BODIES = [{"model": "nope", "max_tokens": 4}, {"model": SERVED}, {"model": SERVED, "max_tokens": 4}, {}]


def test_per_request_accepts_every_body_and_runs_on_the_first_served_model():
    result = _validate(BODIES, per_request=True)
    assert (result.errors, result.total, result.model) == ([], 4, SERVED)


def test_per_request_with_no_served_model_names_the_first_one_given():
    result = _validate([{"model": "nope"}, {"model": "other"}], per_request=True)
    assert (result.errors, result.model) == ([], "nope")


def test_openai_batches_still_refuse_the_file():
    assert [e["code"] for e in _validate(BODIES, per_request=False).errors][:1] == [MODEL_NOT_FOUND]
