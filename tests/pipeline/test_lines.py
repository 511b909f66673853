"""The line contract (app/pipeline/lines.py): one loader, one envelope parser, the endpoint
normalised once. The server and run-batch giving the same code for the same bad line is checked
end to end in tests/runbatch/test_run_batch.py."""

from __future__ import annotations

import json

import pytest

from app.core import jsonbody
from app.pipeline.lines import BadLine, InputLine, LineIds, ResultLine, dumps, error_line, parse_line, response_line

CHAT = "/v1/chat/completions"


def _raw(**changes) -> bytes:
    line = {"custom_id": "a", "method": "POST", "url": CHAT, "body": {"model": "m"}, **changes}
    return json.dumps({k: v for k, v in line.items() if v is not None}).encode()


def test_a_good_line_carries_its_endpoint_in_canonical_form():
    for url in ("/v1/chat/completions", "/chat/completions", "/v1/chat/completions/?api-version=1"):
        assert parse_line(3, _raw(url=url), CHAT) == InputLine(3, "a", CHAT, {"model": "m"})
        assert parse_line(3, _raw(url=url)) == InputLine(3, "a", CHAT, {"model": "m"})


def test_blank_lines_are_none():
    assert parse_line(1, b"  \r") is None


@pytest.mark.parametrize(
    ("raw", "code", "param", "custom_id"),
    [
        (b"{nope", "invalid_json_line", None, None),
        (b'"a string"', "invalid_json_line", None, None),
        (b'{"custom_id": "a", "body": {"t": NaN}}', "invalid_json_line", None, None),
        (_raw(custom_id=None), "missing_required_parameter", "custom_id", None),
        (_raw(custom_id=""), "missing_required_parameter", "custom_id", None),
        (_raw(method=None), "missing_required_parameter", "method", "a"),
        (_raw(url=None), "missing_required_parameter", "url", "a"),
        (_raw(body=None), "missing_required_parameter", "body", "a"),
        (_raw(custom_id=5), "invalid_request", "custom_id", 5),
        (_raw(method="GET"), "invalid_request", "method", "a"),
        (_raw(url="/v1/moderations"), "url_mismatch", "url", "a"),
        (_raw(url=["/v1/chat/completions"]), "url_mismatch", "url", "a"),
        (_raw(body=[1]), "invalid_request", "body", "a"),
    ],
)
def test_bad_lines_get_openai_codes(raw, code, param, custom_id):
    for endpoint in (CHAT, None):  # the server's validation, run-batch
        bad = parse_line(7, raw, endpoint)
        assert isinstance(bad, BadLine)
        assert (bad.code, bad.param, bad.custom_id, bad.line_no) == (code, param, custom_id, 7)
        assert bad.batch_error() == {"code": code, "message": bad.message, "param": param, "line": 7}
        record = bad.error_record()
        assert (record["custom_id"], record["error"]["code"], record["response"]) == (custom_id, code, None)
        assert record["error"]["message"] == f"Line 7: {bad.message}"


def test_another_endpoint_of_the_batch_is_a_url_mismatch():
    bad = parse_line(2, _raw(url="/v1/embeddings"), CHAT)
    assert isinstance(bad, BadLine) and (bad.code, bad.param) == ("url_mismatch", "url")
    assert parse_line(2, _raw(url="/v1/embeddings")) == InputLine(2, "a", "/v1/embeddings", {"model": "m"})


def test_the_loader_keeps_long_integers_exact():
    big, low = 2**64 + 1, -(2**63) - 1
    assert jsonbody.loads(b'{"a": %d, "b": [%d, 1.5]}' % (big, low)) == {"a": big, "b": [low, 1.5]}
    assert type(jsonbody.loads(b'{"a": 12345678901234567890}')["a"]) is int


@pytest.mark.parametrize("raw", [b'{"a": NaN}', b'{"a": Infinity}', b'{"a": "\\ud800"}', b'{"a": 1}\xff', b"{"])
def test_the_loader_refuses_what_is_not_json(raw):
    with pytest.raises(ValueError):
        jsonbody.loads(raw)


def test_a_result_line_reads_its_outcome_and_code():
    ok = ResultLine.of(response_line("a", 200, "req_1", {"choices": []}))
    assert (ok.custom_id, ok.failed, ok.code, ok.request_id) == ("a", False, None, "req_1")
    refused = ResultLine.of(response_line("b", 400, "req_2", {"error": {"type": "BadRequestError", "code": None}}))
    assert (refused.failed, refused.code) == (True, "BadRequestError")
    never_ran = ResultLine.read(dumps(error_line(7, "batch_expired", "late")).encode())
    assert (never_ran.custom_id, never_ran.failed, never_ran.code, never_ran.body) == (7, True, "batch_expired", None)
    for raw in (b"[1]", b'{"response": null}', b"{"):
        with pytest.raises(ValueError):
            ResultLine.read(raw)


def test_line_ids_count_lines_without_a_custom_id():
    ids = LineIds()
    for custom_id in ("a", 2, None, None):
        ids.add(custom_id)
    assert (ids.custom_ids, ids.anonymous, len(ids)) == ({"a", "2"}, 2, 4)


def test_a_run_of_digits_that_is_no_big_integer_keeps_the_fast_parse():
    text = f'{{"id": "12345678901234567890", "x": 0.00012345678901234567, "n": {2**70}}}'
    assert jsonbody.loads(text) == {"id": "12345678901234567890", "x": 0.00012345678901234567, "n": 2**70}
    assert jsonbody.may_hold_long_integer(b"a1234567890123456789") and not jsonbody.may_hold_long_integer(b"123")
