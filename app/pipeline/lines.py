"""The batch line contract, written once: the one envelope parser of an input line (its
`custom_id`, `method`, `url` and `body`, with OpenAI's error codes, app/core/line_errors.py), the
endpoint normalised here and carried on the parsed line; the output/error lines (the OpenAI batch
output format) and the one reader of them (`ResultLine`). The server's validation, the shard run
and `batchd run-batch` all read input lines through `parse_line`, so a line is refused alike by
each; results, retry, Message Batch results and run-batch's resume and retry read result lines
through `ResultLine.read`."""

from __future__ import annotations

import random
from collections.abc import Sequence
from dataclasses import dataclass, field
from itertools import repeat
from typing import Any

import orjson

from app.core import jsonbody
from app.core.endpoints import ALL_ENDPOINTS, normalize_endpoint
from app.core.line_errors import LineErrorCode, batch_error

EXPIRED_MESSAGE = "This request could not be executed before the completion window expired."
CANCELLED_MESSAGE = "This request was not executed because the batch was cancelled."
NOT_JSON_MESSAGE = "This line is not parseable as valid JSON."

# Output line ids need to be unique, not secret: uuid4 reads os.urandom on every call, a
# visible share of the front-end's time on fast endpoints. Seeded from os.urandom once.
_line_ids = random.Random()


def _line_id() -> str:
    return f"batch_req_{_line_ids.getrandbits(128):032x}"


@dataclass(frozen=True, slots=True)
class InputLine:
    """A line that keeps the envelope contract. `url` is its endpoint in canonical form
    (normalize_endpoint), normalised once, when the line was parsed."""

    line_no: int
    custom_id: str
    url: str
    body: dict


@dataclass(frozen=True, slots=True)
class BadLine:
    """A line the envelope contract refuses: OpenAI's code, message and param, and the line's
    custom_id as it gave one (None when it gave none, or no JSON object at all)."""

    line_no: int
    code: LineErrorCode
    message: str
    param: str | None = None
    custom_id: str | int | None = None

    def batch_error(self) -> dict:
        """The batch's `errors.data[]` entry (the server's validation)."""
        return batch_error(self.code, self.message, line=self.line_no, param=self.param)

    def error_record(self) -> dict:
        """The error line `batchd run-batch` writes for it (its line number in the message: an
        error line has no field for it)."""
        return error_line(self.custom_id, self.code, f"Line {self.line_no}: {self.message}")


def _missing(line_no: int, name: str, custom_id: str | int | None) -> BadLine:
    message = f"Missing required parameter: '{name}'."
    return BadLine(line_no, LineErrorCode.MISSING_REQUIRED_PARAMETER, message, name, custom_id)


def _url_mismatch(line_no: int, url: object, endpoint: str | None, custom_id: str | int | None) -> BadLine:
    if endpoint is not None:
        message = f"The URL provided for this request does not match the batch endpoint '{endpoint}'."
    else:
        message = f"The URL {url!r} is not an endpoint batchd runs: {', '.join(sorted(ALL_ENDPOINTS))}."
    return BadLine(line_no, LineErrorCode.URL_MISMATCH, message, "url", custom_id)


def parse_line(line_no: int, raw: bytes, endpoint: str | None = None) -> InputLine | BadLine | None:
    """Read one input line against the envelope contract: None for a blank line, else the
    InputLine or why it is refused. With `endpoint` (a batch's, canonical) the line's url must
    name it; without (run-batch, whose lines each name their own) any endpoint batchd runs."""
    if not raw.strip():
        return None
    try:
        request = jsonbody.loads(raw)
    except ValueError:  # orjson's JSONDecodeError is a ValueError; so is a bad UTF-8 byte
        return BadLine(line_no, LineErrorCode.INVALID_JSON_LINE, NOT_JSON_MESSAGE)
    if not isinstance(request, dict):
        return BadLine(line_no, LineErrorCode.INVALID_JSON_LINE, "Each line must be a JSON object.")
    custom_id = request.get("custom_id")
    given_id = custom_id if isinstance(custom_id, (str, int)) and custom_id != "" else None
    for name in ("custom_id", "method", "url", "body"):
        if request.get(name) in (None, ""):
            return _missing(line_no, name, given_id)
    url, body = request["url"], request["body"]
    if not isinstance(custom_id, str):
        return BadLine(line_no, LineErrorCode.INVALID_REQUEST, "'custom_id' must be a string.", "custom_id", given_id)
    if request["method"] != "POST":
        message = "Only the 'POST' method is supported."
        return BadLine(line_no, LineErrorCode.INVALID_REQUEST, message, "method", custom_id)
    canonical = normalize_endpoint(url) if isinstance(url, str) else None
    if canonical is None or (endpoint is not None and canonical != endpoint):
        return _url_mismatch(line_no, url, endpoint, custom_id)
    if not isinstance(body, dict):
        return BadLine(line_no, LineErrorCode.INVALID_REQUEST, "'body' must be a JSON object.", "body", custom_id)
    return InputLine(line_no, custom_id, canonical, body)


@dataclass(frozen=True, slots=True)
class CleanLines:
    """The custom_ids and bodies of lines that all keep the envelope contract, in line order."""

    custom_ids: Sequence[str]
    bodies: Sequence[dict]


# Lines parsed by one call: a call holds the GIL throughout, and validation's thread must let
# the event loop in every millisecond or so (the lease heartbeat).
_PARSE_SLICE = 1024
_ENVELOPE = ("custom_id", "method", "url", "body")


def parse_clean_lines(lines: Sequence[bytes], endpoint: str, block: bytes) -> CleanLines | None:
    """`parse_line` of many lines at once: their custom_ids and bodies when every one is an
    InputLine for `endpoint`, else None (then ask parse_line line by line: it alone says why a
    line is refused). `block` holds the lines (the long-integer check runs on it once). Checks
    go column by column in C (map, set), so a clean line costs about its JSON parse; a blank
    line, or one that may hold a long integer (jsonbody.loads reads it twice), gets None too."""
    if not lines or jsonbody.may_hold_long_integer(block):
        return None
    try:
        requests: list[Any] = []
        for start in range(0, len(lines), _PARSE_SLICE):
            requests.extend(map(orjson.loads, lines[start : start + _PARSE_SLICE]))
        if set(map(type, requests)) != {dict}:
            return None
        # A missing field reads as None, which fails its check as "" does.
        columns: list[list[Any]] = [list(map(dict.get, requests, repeat(name))) for name in _ENVELOPE]
        custom_ids, methods, urls, bodies = columns
        if set(map(type, custom_ids)) != {str} or not all(custom_ids) or set(methods) != {"POST"}:
            return None
        if any(normalize_endpoint(url) != endpoint for url in set(urls)) or set(map(type, bodies)) != {dict}:
            return None
    except (ValueError, TypeError):  # not JSON; an unhashable method or url
        return None
    return CleanLines(custom_ids, bodies)


def parse_input_line(line_no: int, raw: bytes, endpoint: str | None = None) -> InputLine | None:
    """A line that validation accepted (the shard run): None for blank lines."""
    parsed = parse_line(line_no, raw, endpoint)
    if isinstance(parsed, BadLine):
        raise ValueError(f"line {line_no} passed validation but breaks the line contract: {parsed.message}")
    return parsed


def custom_id_of(raw: bytes) -> str | int | None:
    """The custom_id an input line gives, if any (for the error line of a line never run)."""
    try:
        value = jsonbody.loads(raw)
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


@dataclass(frozen=True)
class ResultLine:
    """One line of an output or error file, read back: a response (`status_code`, `body`,
    `request_id`) or, for a line that never ran or did not finish, `error` ({code, message})."""

    custom_id: str | int | None
    status_code: int | None
    body: Any
    request_id: str | None
    error: dict[str, Any] | None

    @classmethod
    def read(cls, raw: bytes) -> ResultLine:
        """Raises ValueError when `raw` is not a result line (not a JSON object with a custom_id)."""
        return cls.of(jsonbody.loads(raw))

    @classmethod
    def of(cls, record: Any) -> ResultLine:
        if not isinstance(record, dict) or "custom_id" not in record:
            raise ValueError("not a result line (no custom_id)")
        response = record.get("response")
        response = response if isinstance(response, dict) else {}
        error = record.get("error")
        return cls(
            record["custom_id"],
            response.get("status_code"),
            response.get("body"),
            response.get("request_id"),
            error if isinstance(error, dict) else None,
        )

    @property
    def failed(self) -> bool:
        return self.error is not None or self.status_code != 200

    @property
    def code(self) -> str | None:
        """The failure's code: `error.code` of a line that never ran, else the failed response's
        `body.error.code` (its `type` when it has no code); None for a success."""
        error = self.error
        if error is None and self.status_code != 200 and isinstance(self.body, dict):
            error = self.body.get("error")
        if not isinstance(error, dict) or not self.failed:
            return None
        code = error.get("code") if error.get("code") is not None else error.get("type")
        return None if code is None else str(code)


@dataclass
class LineIds:
    """Which lines a result file holds (run-batch's resume: written; its retry: failed): their
    custom_ids, and how many had none. A line without one (an input line that was not JSON, or
    gave no custom_id) gets its error line the moment it is read, in input order, so those are
    the first `anonymous` such lines of the input."""

    custom_ids: set[str] = field(default_factory=set)
    anonymous: int = 0

    def add(self, custom_id: str | int | None) -> None:
        if custom_id is None:
            self.anonymous += 1
        else:
            self.custom_ids.add(str(custom_id))

    def __len__(self) -> int:
        return len(self.custom_ids) + self.anonymous
