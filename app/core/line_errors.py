"""The codes of a refused batch line, as OpenAI's batch errors name them: one set for the
server's file validation (the batch's `errors.data[].code`), `batchd run-batch`'s error lines and
the engines' line checks, so the same mistake has the same code wherever it is found.

A StrEnum: a member is its string on the wire, in the database and in result files."""

from __future__ import annotations

from enum import StrEnum


class LineErrorCode(StrEnum):
    # The envelope (app/pipeline/lines.py)
    INVALID_JSON_LINE = "invalid_json_line"  # not JSON, or not a JSON object
    MISSING_REQUIRED_PARAMETER = "missing_required_parameter"  # custom_id, method, url, body or body.model
    INVALID_REQUEST = "invalid_request"  # a field of the wrong type or value (method not POST, body not an object)
    URL_MISMATCH = "url_mismatch"  # the url is not the batch's endpoint (run-batch: not an endpoint batchd runs)
    # The file as a whole (app/pipeline/validation.py)
    DUPLICATE_CUSTOM_ID = "duplicate_custom_id"
    MODEL_MISMATCH = "model_mismatch"
    EMPTY_FILE = "empty_file"
    TOO_MANY_TASKS = "too_many_tasks"
    # The body, checked by the engines (app/engine/line_checks.py)
    MODEL_NOT_FOUND = "model_not_found"
    UNSUPPORTED_ENDPOINT = "unsupported_endpoint"  # the model cannot serve that url
    STREAMING_UNSUPPORTED = "streaming_unsupported"
    # A line that never ran, or did not finish (app/worker/finalize.py writes its error line)
    BATCH_CANCELLED = "batch_cancelled"
    BATCH_EXPIRED = "batch_expired"
    REQUEST_TIMEOUT = "request_timeout"  # also an upstream's 504 when a line's deadline passed
    # A batch refused by its project's limits (the batch's errors, every line the same)
    TOKEN_LIMIT_EXCEEDED = "token_limit_exceeded"
    REQUEST_LIMIT_EXCEEDED = "request_limit_exceeded"
    # A line whose model's engine could not take it in time (a flex request: restarting, or busy
    # with another model's batch; app/engine/supervision.py, app/engine/local/residency.py)
    ENGINE_UNAVAILABLE = "engine_unavailable"
    # A batch whose processing failed too many times in a row: ended, not retried (app/worker/dead_letter.py)
    PROCESSING_FAILED = "processing_failed"
    # A line in flight at two deaths of its model's engine: quarantined, never run again (app/engine/poison.py)
    ENGINE_CRASHED = "engine_crashed"


def batch_error(code: str, message: str, *, line: int | None = None, param: str | None = None) -> dict:
    """An entry of a batch's `errors.data[]`, in OpenAI's shape: a refused line's (its 1-based
    `line`, the `param` at fault) or the whole batch's (a limit: no line)."""
    return {"code": code, "message": message, "param": param, "line": line}
