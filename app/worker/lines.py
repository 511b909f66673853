"""Turning input lines into output/error lines (the OpenAI batch output format)."""

from __future__ import annotations

import json
import uuid
from dataclasses import dataclass

from app.engine.endpoints import normalize_endpoint

EXPIRED_MESSAGE = "This request could not be executed before the completion window expired."
CANCELLED_MESSAGE = "This request was not executed because the batch was cancelled."


@dataclass
class InputLine:
    line_no: int
    custom_id: str
    url: str
    body: dict


def parse_input_line(line_no: int, raw: bytes) -> InputLine | None:
    """Parse a line that validation accepted; None for blank lines."""
    if not raw.strip():
        return None
    request = json.loads(raw)
    return InputLine(line_no, request["custom_id"], normalize_endpoint(request["url"]), request["body"])


def custom_id_of(raw: bytes) -> str | None:
    try:
        value = json.loads(raw)
    except ValueError:
        return None
    custom_id = value.get("custom_id") if isinstance(value, dict) else None
    return custom_id if isinstance(custom_id, (str, int)) else None


def response_line(custom_id: str, status_code: int, request_id: str, body: dict) -> dict:
    return {
        "id": f"batch_req_{uuid.uuid4().hex}",
        "custom_id": custom_id,
        "response": {"status_code": status_code, "request_id": request_id, "body": body},
        "error": None,
    }


def error_line(custom_id: str | None, code: str, message: str) -> dict:
    """A non-HTTP failure: `response` is null and `error` says why."""
    return {
        "id": f"batch_req_{uuid.uuid4().hex}",
        "custom_id": custom_id,
        "response": None,
        "error": {"code": code, "message": message},
    }


def dumps(record: dict) -> str:
    return json.dumps(record, ensure_ascii=False, separators=(",", ":"))
