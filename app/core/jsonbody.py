"""JSON for response bodies and result lines: orjson for speed, the stdlib where orjson would
change a value.

orjson reads an integer beyond 64 bits as a float (its digits lost: say a request field that a
response echoes, or an upstream's id) and refuses to write one at all. Python's json keeps such
integers exact, so the rare body holding one takes the slow path; every other stays fast."""

from __future__ import annotations

import json
from typing import Any

import orjson

# orjson keeps integers in [-2**63, 2**64) exact; anything it read as a float this large may
# have been an integer (a genuine float this large only costs the slower parse).
_BIG = float(2**63)


def loads(raw: bytes | str) -> Any:
    """Parse JSON, keeping integers of any size exact: the one JSON loader of request bodies,
    batch lines, result lines and engine responses. orjson decides what is JSON (NaN, Infinity
    and lone surrogates are not); a text with a run of 19 digits whose parse holds a number
    orjson could not keep is read again by the stdlib. Raises ValueError (a text nested too deep
    for orjson, or for the walk and the stdlib after it, too)."""
    value = orjson.loads(raw)
    data = raw.encode() if isinstance(raw, str) else raw
    try:
        if may_hold_long_integer(data) and _has_big_number(value):
            return json.loads(raw)
    except RecursionError:
        raise ValueError("JSON nested too deeply") from None
    return value


# Bytes that hold no digit as "0"s, each digit as "9": a run of 19 digits is a run of 19 "9"s
# (one C pass where a regex would be a tenth of a bulk check's time).
_DIGITS_AS_NINES = bytes(0x39 if 0x30 <= b <= 0x39 else 0x30 for b in range(256))
_LONG_RUN = b"9" * 19


def may_hold_long_integer(data: bytes) -> bool:
    """Whether `data` has a run of 19 digits, which every integer orjson cannot keep has (the
    cheap test before the walk; validation runs it once on a block of lines)."""
    return _LONG_RUN in data.translate(_DIGITS_AS_NINES)


def dumps(value: Any) -> str:
    """Compact UTF-8 JSON text; integers of any size written exactly."""
    try:
        return orjson.dumps(value).decode()
    except TypeError:  # an integer beyond 64 bits (orjson: "Integer exceeds 64-bit range")
        return json.dumps(value, ensure_ascii=False, separators=(",", ":"), allow_nan=False)


def _has_big_number(value: Any) -> bool:
    if isinstance(value, dict):
        return any(_has_big_number(v) for v in value.values())
    if isinstance(value, list):
        try:  # lists of numbers (embeddings, logprobs) at C speed
            return bool(value) and (max(value) >= _BIG or min(value) <= -_BIG)
        except TypeError:
            return any(_has_big_number(v) for v in value)
    return isinstance(value, float) and not -_BIG < value < _BIG
