"""A background response as OpenAI's Response object: the one-line batch's state mapped to
OpenAI's statuses, the request echoed while it waits, the engine's Response body once it ran.

Pure over what the service read (the batch row, whether its line started, the request body and
the line's result), so every status is decided in one place."""

from __future__ import annotations

from typing import Any

from app.core.line_errors import LineErrorCode
from app.core.statuses import BatchStatus, ResponseStatus
from app.db.models import Batch
from app.pipeline.lines import ResultLine

# What a Response echoes of its request (with OpenAI's defaults) while no body of the engine's
# says otherwise.
_ECHOED: dict[str, Any] = {
    "instructions": None,
    "max_output_tokens": None,
    "metadata": {},
    "parallel_tool_calls": True,
    "previous_response_id": None,
    "reasoning": None,
    "temperature": None,
    "text": {"format": {"type": "text"}},
    "tool_choice": "auto",
    "tools": [],
    "top_p": None,
    "truncation": None,  # OpenAI's default is "disabled"; null (allowed) keeps it out of the status scan
    "user": None,
}
_CANCELLED = (BatchStatus.CANCELLING, BatchStatus.CANCELLED)


def response_object(
    batch: Batch, request: dict[str, Any], *, started: bool, result: ResultLine | None
) -> dict[str, Any]:
    """The Response of `batch`: `request` is its request body, `started` whether its line was
    claimed to run, `result` its result line once the batch has ended (None if there is none)."""
    response: dict[str, Any] = {name: request.get(name, default) for name, default in _ECHOED.items()}
    response |= {"model": request.get("model"), "output": [], "usage": None, "error": None, "incomplete_details": None}
    deadline = batch.expires_at - batch.created_at
    status = running_status(batch.status, started)
    if status is None:
        status = ResponseStatus.FAILED
        if batch.status == BatchStatus.FAILED:
            response["error"] = _refusal(batch)
        elif batch.status == BatchStatus.EXPIRED:
            response["error"] = _expired(deadline)
        elif result is None:
            response["error"] = {"code": "server_error", "message": "The response's result is no longer available."}
        elif not result.failed and isinstance(result.body, dict):
            response |= result.body
            status = answered_status(result)
        else:
            response["error"] = _line_error(result, deadline)
    # The engine's body names its own id and time: the response is the one the client created.
    response |= {
        "id": batch.id,
        "object": "response",
        "created_at": batch.created_at,
        "status": status,
        "background": True,
    }
    return response


def answered_status(result: ResultLine | None) -> ResponseStatus:
    """The status of a response whose batch completed with `result` as its line's result:
    `completed`, or `incomplete` when the engine answered 200 with `status: "incomplete"`;
    `failed` when the line failed (or its result is gone)."""
    if result is None or result.failed or not isinstance(result.body, dict):
        return ResponseStatus.FAILED
    if result.body.get("status") == ResponseStatus.INCOMPLETE:
        return ResponseStatus.INCOMPLETE
    return ResponseStatus.COMPLETED


def running_status(status: BatchStatus, started: bool) -> ResponseStatus | None:
    """The status of a response whose batch has not completed (None: it has)."""
    if status in _CANCELLED:
        return ResponseStatus.CANCELLED
    if status == BatchStatus.VALIDATING:
        return ResponseStatus.QUEUED
    if status == BatchStatus.IN_PROGRESS:
        return ResponseStatus.IN_PROGRESS if started else ResponseStatus.QUEUED
    if status == BatchStatus.FINALIZING:
        return ResponseStatus.IN_PROGRESS
    return None


def _refusal(batch: Batch) -> dict[str, str]:
    """A batch refused at validation (an unknown model, a token limit): its first error."""
    first = (batch.errors or [{}])[0]
    return {
        "code": str(first.get("code") or "invalid_prompt"),
        "message": str(first.get("message") or "The request could not run."),
    }


def _expired(deadline: int) -> dict[str, str]:
    return {
        "code": LineErrorCode.BATCH_EXPIRED,
        "message": f"The response did not finish within batchd's background response expiry of {deadline} s "
        "(BATCHD_BACKGROUND_RESPONSE_EXPIRY_SECONDS).",
    }


def _line_error(result: ResultLine, deadline: int) -> dict[str, str]:
    """The error of a line that failed: the engine's (a 4xx/5xx body) or batchd's (it never ran)."""
    if result.error is not None:
        if result.error.get("code") == LineErrorCode.BATCH_EXPIRED:
            return _expired(deadline)
        return {
            "code": str(result.error.get("code") or "server_error"),
            "message": str(result.error.get("message") or "The request did not finish."),
        }
    error = result.body.get("error") if isinstance(result.body, dict) else None
    error = error if isinstance(error, dict) else {}
    default_code = "server_error" if (result.status_code or 500) >= 500 else "invalid_prompt"
    return {
        "code": str(error.get("code") or error.get("type") or default_code),
        "message": str(error.get("message") or "The request failed."),
    }
