"""The Message Batch body parser (app/domains/message_batches/body.py) gives `jsonbody.loads`'s
value and refusals, whatever the chunks and however short its decoded pieces, and says whether
the text escapes a NUL or a surrogate."""

from __future__ import annotations

import pytest

from app.core import jsonbody
from app.domains.message_batches import body

CASES = [
    '{"requests":[{"a":1},{"b":[1,2]}]}',
    ' { "requests" : [ ] , "x" : 1 } ',
    '{"requests":[ 1 , 2.5e-3 , true, null, "s" ] , "z":[1, 2]}\n',
    '{"n": 12345, "requests":[12345]}',
    '{"requests":[{"a":1}],"m":-1.5e3}',
    '{"requests":[{"n":123456789012345678901234567890}]}',  # exact, as jsonbody keeps it
    '{"requests":[{"s":"\\ud83d\\ude00"}]}',  # a pair: one character
    '{"a":"\\ud83d\\ude00", "requests":[{"b":"x"}]}',
    '{"requests":[{"s":"a\\u0000"}]}',
    '{"requests":[{"s":"é"}]}',
    '{"requests":"x"}',
    '{"a":{"requests":[1]}}',
    "{}",
    "[]",
    '"x"',
    # refused, as jsonbody refuses them
    '{"requests":[1,]}',
    '{"a":1,}',
    '{"a":1 "b":2}',
    '{"requests":[NaN]}',
    '{"a":1}x',
    '{"requests":[{"s":"\\ud800"}]}',  # an unpaired surrogate
    '{"requests":[{"b":"x\\ud83d"}]}',
    "",
    "  ",
    '{"a"',
    '{"requests":[{"x":"abc',
    '{"requests":[1] ',
    '{"requests":[-]}',
]


def _parsed(parse, raw: bytes):
    try:
        return parse(raw)
    except ValueError:
        return "refused"


@pytest.mark.parametrize("piece", [body.PIECE, 7, 3, 1])
@pytest.mark.parametrize("text", CASES)
def test_the_value_and_refusals_are_jsonbodys(monkeypatch, text, piece):
    monkeypatch.setattr(body, "PIECE", piece)
    raw = text.encode()
    expected = _parsed(jsonbody.loads, raw)
    escapes = "\\u0000" in text or "\\ud" in text
    for chunks in ([raw], [raw[: len(raw) // 2], raw[len(raw) // 2 :]], [bytes([b]) for b in raw]):
        got = _parsed(body.loads, chunks)
        if expected == "refused":
            assert got == "refused", chunks
        else:
            assert got != "refused", chunks
            assert (got.value, got.may_be_unclean) == (expected, escapes)


def test_an_escape_across_two_pieces_is_seen(monkeypatch):
    monkeypatch.setattr(body, "PIECE", 16)
    text = '{"requests":[{"s":"' + "x" * 12 + '\\u0000"}]}'
    assert body.loads([text.encode()]).may_be_unclean


def test_invalid_utf8_is_refused():
    with pytest.raises(ValueError):
        body.loads([b'{"a":"\xff"}'])
    assert body.loads([b'{"a":"\xc3', b'\xa9"}']).value == {"a": "é"}
