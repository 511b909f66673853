"""Anthropic result lines from batchd's output and error lines (app/domains/message_batches/results.py)."""

from __future__ import annotations

from app.domains.message_batches.results import anthropic_result
from app.pipeline.lines import ResultLine, error_line, response_line

MESSAGE = {"id": "msg_1", "type": "message", "role": "assistant", "content": [{"type": "text", "text": "hi"}]}


def test_a_200_line_is_succeeded_with_the_message():
    line = response_line("a", 200, "req_1", MESSAGE)
    assert anthropic_result(ResultLine.of(line)) == {
        "custom_id": "a",
        "result": {"type": "succeeded", "message": MESSAGE},
    }


def test_an_error_reply_is_errored_with_anthropics_error_object_named_by_its_status():
    for status, body, kind in [
        (
            404,
            {"error": {"message": "no model", "type": "NotFoundError", "param": "model", "code": 404}},
            "not_found_error",
        ),
        (400, {"type": "error", "error": {"type": "BadRequestError", "message": "no model"}}, "invalid_request_error"),
        (500, {"error": {"message": "no model"}}, "api_error"),
    ]:
        result = anthropic_result(ResultLine.of(response_line("a", status, "req_1", body)))["result"]
        assert result == {
            "type": "errored",
            "error": {"type": "error", "error": {"type": kind, "message": "no model"}, "request_id": "req_1"},
        }


def test_lines_that_never_ran_are_canceled_or_expired():
    assert anthropic_result(ResultLine.of(error_line("a", "batch_cancelled", "x")))["result"] == {"type": "canceled"}
    assert anthropic_result(ResultLine.of(error_line("a", "batch_expired", "x")))["result"] == {"type": "expired"}
    timed_out = anthropic_result(ResultLine.of(error_line("a", "request_timeout", "The request did not finish.")))[
        "result"
    ]
    assert timed_out["type"] == "errored" and timed_out["error"]["error"]["type"] == "api_error"
