"""Turning input lines into output/error lines (the OpenAI batch output format)."""

from __future__ import annotations

import json
import random
import re
from dataclasses import dataclass

import orjson

from app.core import jsonbody
from app.core.endpoints import normalize_endpoint

EXPIRED_MESSAGE = "This request could not be executed before the completion window expired."
CANCELLED_MESSAGE = "This request was not executed because the batch was cancelled."

# Output line ids need to be unique, not secret: uuid4 reads os.urandom on every call, a
# visible share of the front-end's time on fast endpoints. Seeded from os.urandom once.
_line_ids = random.Random()


def _line_id() -> str:
    return f"batch_req_{_line_ids.getrandbits(128):032x}"


@dataclass
class InputLine:
    line_no: int
    custom_id: str
    url: str
    body: dict


# orjson rounds an integer of 2**64 or more (20+ digits) to a float; such a line takes the stdlib.
_LONG_NUMBER = re.compile(rb"\d{19}")


def _parse(raw: bytes) -> dict:
    """A validated line as the stdlib reads it, through orjson where that is the same thing
    (stdlib json was a tenth of an upstream replica's CPU per line in W8): not where a number
    may be too long for it, nor for what only the stdlib accepts (NaN, lone surrogates)."""
    if not _LONG_NUMBER.search(raw):
        try:
            return orjson.loads(raw)
        except orjson.JSONDecodeError:
            pass
    return json.loads(raw)


def parse_input_line(line_no: int, raw: bytes) -> InputLine | None:
    """Parse a line that validation accepted; None for blank lines."""
    if not raw.strip():
        return None
    request = _parse(raw)
    endpoint = normalize_endpoint(request["url"])
    assert endpoint is not None, "validation accepted this line's url"
    return InputLine(line_no, request["custom_id"], endpoint, request["body"])


def custom_id_of(raw: bytes) -> str | int | None:
    try:
        value = json.loads(raw)
    except ValueError:
        return None
    custom_id = value.get("custom_id") if isinstance(value, dict) else None
    return custom_id if isinstance(custom_id, (str, int)) else None


def response_line(custom_id: str, status_code: int, request_id: str, body: dict) -> dict:
    return {
        "id": _line_id(),
        "custom_id": custom_id,
        "response": {"status_code": status_code, "request_id": request_id, "body": body},
        "error": None,
    }


def error_line(custom_id: str | int | None, code: str, message: str) -> dict:
    """A non-HTTP failure: `response` is null and `error` says why."""
    return {
        "id": _line_id(),
        "custom_id": custom_id,
        "response": None,
        "error": {"code": code, "message": message},
    }


def dumps(record: dict) -> str:
    """Compact UTF-8 JSON (orjson: stdlib json was a quarter of the front-end's time when
    writing embedding lines; integers beyond 64 bits fall back to the stdlib)."""
    return jsonbody.dumps(record)
