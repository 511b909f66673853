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
    """Parse JSON, keeping integers of any size exact."""
    value = orjson.loads(raw)
    return json.loads(raw) if _has_big_number(value) else value


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
