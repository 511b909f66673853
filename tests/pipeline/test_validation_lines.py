"""Validation's bookkeeping (app/pipeline/validation.py) whatever the file's chunking: line numbers
count blank lines, CRLF is stripped, the last line needs no newline, shards start at byte
offsets, the line and error limits stop it, and tokens are counted TOKEN_CHUNK lines a call."""

from __future__ import annotations

import asyncio
import json

import pytest

from app.db.repositories.shards import ShardSpan
from app.pipeline.validation import TOKEN_CHUNK, ValidationResult, validate_input_file


class _Checker:
    def __init__(self) -> None:
        self.counted: list[int] = []  # the size of each count_prompt_tokens call

    def validate_line(self, endpoint, body):
        return None

    def lines_pass(self, endpoint, model, bodies):
        return True

    async def count_prompt_tokens(self, endpoint, bodies):
        self.counted.append(len(bodies))
        return [2] * len(bodies)


def _line(i: int) -> bytes:
    body = {"model": "m", "messages": [{"role": "user", "content": "Hi"}]}
    return json.dumps({"custom_id": f"r{i}", "method": "POST", "url": "/v1/chat/completions", "body": body}).encode()


async def _chunks(data: bytes, size: int):
    for start in range(0, len(data), size):
        yield data[start : start + size]


def _validate(data: bytes, chunk: int, checker=None, **limits) -> ValidationResult:
    options = {"max_lines": 100, "max_errors": 10, "shard_lines": 2, "count_tokens": True, **limits}
    return asyncio.run(
        validate_input_file(_chunks(data, chunk), "/v1/chat/completions", checker or _Checker(), **options)
    )


# Lines: 1 CRLF, 2 blank, 3, 4 not JSON, 5 only spaces, 6 without a newline.
FILE = _line(0) + b"\r\n\n" + _line(1) + b"\nnot json\n   \n" + _line(2)
FOURTH = len(_line(0)) + 3 + len(_line(1)) + 1


@pytest.mark.parametrize("chunk", [1, 7, len(FILE)])
def test_line_numbers_and_shard_offsets_do_not_depend_on_the_chunks(chunk):
    result = _validate(FILE, chunk)
    assert [(e["code"], e["line"]) for e in result.errors] == [("invalid_json_line", 4)]
    assert result.total == 4
    assert result.shards is not None and result.shards.spans() == [
        ShardSpan(first_line=1, end_line=4, start_offset=0, end_offset=FOURTH, lines=2),
        ShardSpan(first_line=4, end_line=7, start_offset=FOURTH, end_offset=None, lines=2),
    ]


def test_one_line_too_many_stops_at_that_line():
    result = _validate(b"\n".join(_line(i) for i in range(5)), 7, max_lines=3)
    assert [(e["code"], e["line"]) for e in result.errors] == [("too_many_tasks", 4)]
    assert result.total == 4


def test_validation_stops_at_max_errors():
    result = _validate(b"{\n" * 10, 3, max_errors=3)
    assert [e["line"] for e in result.errors] == [1, 2, 3]
    assert result.total == 3


def test_an_empty_file_is_refused():
    assert [e["code"] for e in _validate(b"\n \r\n", 1).errors] == ["empty_file"]


def test_tokens_are_counted_token_chunk_lines_a_call():
    checker = _Checker()
    lines = 3 * TOKEN_CHUNK + 5
    result = _validate(b"\n".join(_line(i) for i in range(lines)), 1024 * 1024, checker, max_lines=lines)
    assert (result.errors, result.prompt_tokens) == ([], 2 * lines)
    assert sum(checker.counted) == lines and max(checker.counted) == TOKEN_CHUNK


def _capped(i: int, **cap: int) -> bytes:
    body = {"model": "m", "messages": [{"role": "user", "content": "Hi"}], **cap}
    return json.dumps({"custom_id": f"c{i}", "method": "POST", "url": "/v1/chat/completions", "body": body}).encode()


@pytest.mark.parametrize("chunk", [5, 1024 * 1024])
def test_the_output_bound_is_counted_with_the_tokens(chunk):
    lines = [_capped(0, max_tokens=7), _capped(1, max_completion_tokens=3, max_tokens=50), _capped(2), _line(3)]
    result = _validate(b"\n".join(lines), chunk)
    assert (result.capped_output_tokens, result.uncapped_lines, result.uncapped_prompt_tokens) == (10, 2, 4)
