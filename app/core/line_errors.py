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
