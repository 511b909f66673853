"""Integers beyond 64 bits in response bodies stay exact in result lines (orjson alone read
them as floats, and could not write them back)."""

from __future__ import annotations

import json

from app.core import jsonbody
from tests.support.batches import CHAT_MODEL, create, read_lines, wait_for

HUGE = 2**70 + 1  # no float holds it exactly


def test_a_response_echoing_a_huge_integer_keeps_it_exact(model_client):
    line = {
        "custom_id": "huge",
        "method": "POST",
        "url": "/v1/responses",
        "body": {
            "model": CHAT_MODEL,
            "input": "hello",
            "max_output_tokens": 4,
            "temperature": 0,
            "max_tool_calls": HUGE,
        },
    }
    done = wait_for(model_client, create(model_client, [line], endpoint="/v1/responses").id)
    assert done.status == "completed", done.errors
    raw = model_client.files.content(done.output_file_id).content
    assert f'"max_tool_calls":{HUGE}'.encode() in raw
    [result] = read_lines(model_client, done.output_file_id)
    assert result["response"]["status_code"] == 200
    assert result["response"]["body"]["max_tool_calls"] == HUGE


def test_jsonbody_round_trips_huge_integers_and_keeps_floats():
    raw = json.dumps({"a": [HUGE, -HUGE, 2**64 - 1, 0.00012345678901234567], "b": {"c": HUGE}}).encode()
    value = jsonbody.loads(raw)
    assert value == {"a": [HUGE, -HUGE, 2**64 - 1, 0.00012345678901234567], "b": {"c": HUGE}}
    assert json.loads(jsonbody.dumps(value)) == value
    assert jsonbody.loads(b'{"x": [1.5, 2, null, "s", {}]}') == {"x": [1.5, 2, None, "s", {}]}
