"""Validation's bulk check of a chunk (app/pipeline/validation.py, `feed_clean`) decides nothing
on its own: a file gives the same result (errors with their codes, messages, params and line
numbers; the count; the shards' offsets; the model; the tokens) whether its chunks are checked in
bulk or line by line, whatever is wrong with its lines and however it is chunked."""

from __future__ import annotations

import asyncio
import json

import pytest

from app.engine.line_checks import common_line_problem, common_lines_pass
from app.pipeline import validation
from app.pipeline.prefix_order import PrefixOrder
from app.pipeline.validation import ValidationResult, validate_input_file

ENDPOINT = "/v1/embeddings"
SERVED = {"m": {ENDPOINT}, "other": {ENDPOINT}}


class _Checker:
    """The upstream registry's checks (model served, endpoint, streaming), counting bulk checks."""

    def __init__(self) -> None:
        self.bulk = 0

    def _endpoints_of(self, model):
        return SERVED.get(model)

    def validate_line(self, endpoint, body):
        return common_line_problem(endpoint, body, self._endpoints_of, list(SERVED))[0]

    def lines_pass(self, endpoint, model, bodies):
        self.bulk += 1
        return common_lines_pass(endpoint, bodies, self._endpoints_of, list(SERVED))

    async def count_prompt_tokens(self, endpoint, bodies):
        return [len(json.dumps(body)) for body in bodies]


def _line(i: int, **changes) -> bytes:
    line = {"custom_id": f"c-{i}", "method": "POST", "url": ENDPOINT, "body": {"model": "m", "input": f"line {i}"}}
    for key, value in changes.items():
        if key.startswith("body_"):
            line["body"][key.removeprefix("body_")] = value
        else:
            line[key] = value
    return json.dumps(line, separators=(",", ":")).encode()


def _file(n: int, bad: dict[int, bytes] | None = None, end: bytes = b"\n") -> bytes:
    lines = [(bad or {}).get(i, _line(i)) for i in range(n)]
    return b"\n".join(lines) + end


async def _chunks(data: bytes, size: int):
    for start in range(0, len(data), size):
        yield data[start : start + size]


def _validate(data: bytes, chunk: int, **options) -> tuple[ValidationResult, _Checker]:
    checker = _Checker()
    limits = {"max_lines": 10_000, "max_errors": 5, "shard_lines": 7, "count_tokens": True, **options}
    result = asyncio.run(validate_input_file(_chunks(data, chunk), ENDPOINT, checker, **limits))
    return result, checker


def _summary(result: ValidationResult) -> tuple:
    spans = result.shards.spans() if result.shards is not None else None
    return result.errors, result.total, spans, result.model, result.prompt_tokens, result.tokens_by_model


def _both(data: bytes, chunk: int, monkeypatch, **options) -> tuple[tuple, tuple, int]:
    bulk, checker = _validate(data, chunk, **options)
    with monkeypatch.context() as patch:
        patch.setattr(validation._Validator, "feed_clean", lambda self, block: False)
        by_line, _ = _validate(data, chunk, **options)
    return _summary(bulk), _summary(by_line), checker.bulk


N = 60
BAD_LINES = {
    "blank": b"",
    "spaces": b"   ",
    "crlf": _line(5) + b"\r",
    "not json": b"{not json",
    "not an object": b"[1, 2]",
    "no custom_id": json.dumps({"method": "POST", "url": ENDPOINT, "body": {"model": "m"}}).encode(),
    "empty custom_id": _line(5, custom_id=""),
    "custom_id a number": _line(5, custom_id=5),
    "no method": _line(5, method=None),
    "method GET": _line(5, method="GET"),
    "method a list": _line(5, method=["POST"]),
    "another endpoint": _line(5, url="/v1/chat/completions"),
    "url an object": _line(5, url={"a": 1}),
    "body a string": _line(5, body="text"),
    "no model": _line(5, body={"input": "x"}),
    "empty model": _line(5, body_model=""),
    "model a number": _line(5, body_model=7),
    "model a list": _line(5, body_model=["m"]),
    "other model": _line(5, body_model="other"),
    "unserved model": _line(5, body_model="nope"),
    "streaming": _line(5, body_stream=True),
    "repeated custom_id": _line(5, custom_id="c-3"),
    "repeated custom_id far off": _line(45, custom_id="c-2"),
    "long integer": _line(5, body_dimensions=12345678901234567890123),
    "two objects": _line(5) + b" " + _line(70),
    "lone surrogate": _line(5, body_input="x").replace(b'"x"', b'"\\ud800"'),
    "bad utf-8": _line(5, body_input="x").replace(b'"x"', b'"\xff"'),
    "number out of range": _line(5).replace(b"}}", b',"x":1e400}}'),
}


@pytest.mark.parametrize("kind", list(BAD_LINES))
@pytest.mark.parametrize("chunk", [97, 1024 * 1024])
def test_a_bad_line_gets_the_same_result_in_bulk_and_line_by_line(kind, chunk, monkeypatch):
    where = 45 if kind.endswith("far off") else 5
    bulk, by_line, _ = _both(_file(N, {where: BAD_LINES[kind]}), chunk, monkeypatch)
    assert bulk == by_line


def test_a_line_spread_over_two_lines_is_not_taken_for_one():
    """Two half lines and a line of two requests keep the count of lines: only parsing each
    line alone (not the chunk as one JSON array) sees that three of them are broken."""
    first, second = _line(4)[:30], _line(4)[30:]
    data = _file(10, {4: first, 5: second, 6: _line(6) + b"," + _line(60)})
    result, _ = _validate(data, 1024 * 1024)
    assert [e["line"] for e in result.errors] == [5, 6, 7]


@pytest.mark.parametrize("chunk", [97, 1000, 1024 * 1024])
@pytest.mark.parametrize("end", [b"\n", b"", b"\n\n"])
def test_a_clean_file_is_checked_in_bulk_with_the_same_result(chunk, end, monkeypatch):
    bulk, by_line, bulk_checks = _both(_file(N, end=end), chunk, monkeypatch)
    assert bulk == by_line
    assert bulk[0] == [] and bulk[1] == N and bulk[3] == "m"
    assert bulk_checks > 0 or (end == b"\n\n" and chunk > len(_file(N)))  # a blank line: that chunk line by line


@pytest.mark.parametrize("chunk", [97, 1024 * 1024])
def test_many_errors_and_too_many_lines_stop_alike(chunk, monkeypatch):
    broken = {i: b"{" for i in range(20, 40)}
    bulk, by_line, _ = _both(_file(N, broken), chunk, monkeypatch)
    assert bulk == by_line and len(bulk[0]) == 5
    bulk, by_line, _ = _both(_file(N), chunk, monkeypatch, max_lines=33)
    assert bulk == by_line and [e["code"] for e in bulk[0]] == ["too_many_tasks"]


def test_azure_urls_and_other_spellings_of_the_endpoint_pass_in_bulk(monkeypatch):
    data = _file(N, {3: _line(3, url="/embeddings"), 4: _line(4, url="/v1/embeddings/")})
    bulk, by_line, _ = _both(data, 1024 * 1024, monkeypatch)
    assert bulk == by_line and bulk[0] == []


@pytest.mark.parametrize("chunk", [97, 1024 * 1024])
@pytest.mark.parametrize("bad", [{}, {7: b""}, {7: _line(7) + b"\r"}])
def test_the_prefix_order_gets_the_same_places_in_bulk(chunk, bad, monkeypatch, tmp_path):
    def places(force_lines: bool) -> tuple:
        order = PrefixOrder(tmp_path)
        with monkeypatch.context() as patch:
            if force_lines:
                patch.setattr(validation._Validator, "feed_clean", lambda self, block: False)
            _validate(_file(N, bad), chunk, order=order)
        try:
            return list(order.offsets), list(order.lengths), list(order.keys), list(order.lines()), list(order.line_nos)
        finally:
            order.close()

    bulk = places(False)
    assert bulk == places(True)
    # Each place names its input line: an ordered copy's positions (app/pipeline/input_order.py).
    blank = {i + 1 for i, raw in bad.items() if not raw.strip()}
    assert sorted(bulk[4]) == [n for n in range(1, N + 1) if n not in blank]
