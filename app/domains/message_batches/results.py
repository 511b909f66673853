"""A Message Batch's results: the batch's output and error lines (OpenAI's batch line format,
which the worker writes for every batch) turned into Anthropic's result lines,
``{"custom_id", "result": {"type": "succeeded" | "errored" | "canceled" | "expired", ...}}``."""

from __future__ import annotations

from collections.abc import AsyncIterator
from typing import Any

from app.core import jsonbody
from app.core.anthropic_api import anthropic_error
from app.core.line_errors import LineErrorCode
from app.core.statuses import MessageResultType
from app.pipeline.jsonl import split_lines
from app.pipeline.lines import ResultLine, custom_id_of

# Error codes of lines that never ran (app/worker/finalize.py) and the result type they become.
_NOT_RUN: dict[str, MessageResultType] = {
    LineErrorCode.BATCH_CANCELLED: MessageResultType.CANCELED,
    LineErrorCode.BATCH_EXPIRED: MessageResultType.EXPIRED,
}


def anthropic_result(line: ResultLine) -> dict[str, Any]:
    """The result line of one output or error line."""
    if line.error is None:
        if line.status_code == 200:
            return {"custom_id": line.custom_id, "result": {"type": MessageResultType.SUCCEEDED, "message": line.body}}
        return {
            "custom_id": line.custom_id,
            "result": errored(int(line.status_code or 500), _message_of(line.body), line.request_id),
        }
    kind = _NOT_RUN.get(str(line.error.get("code")))
    if kind is not None:
        return {"custom_id": line.custom_id, "result": {"type": kind}}
    message = str(line.error.get("message") or "The request did not finish.")
    return {"custom_id": line.custom_id, "result": errored(500, message)}


def errored(status_code: int, message: str, request_id: str | None = None) -> dict[str, Any]:
    return {"type": MessageResultType.ERRORED, "error": anthropic_error(status_code, message, request_id)}


def _message_of(body: Any) -> str:
    """The message of an error body, in OpenAI's envelope or Anthropic's (both nest `error`)."""
    error = body.get("error") if isinstance(body, dict) else None
    if isinstance(error, dict) and isinstance(error.get("message"), str):
        return error["message"]
    return "The request failed."


async def converted_lines(chunks: AsyncIterator[bytes]) -> AsyncIterator[bytes]:
    """Stream a batch result file as Anthropic result lines."""
    async for _, raw in split_lines(chunks):
        if raw.strip():
            yield jsonbody.dumps(anthropic_result(ResultLine.read(raw))).encode() + b"\n"


async def same_result_lines(chunks: AsyncIterator[bytes], result: dict[str, Any]) -> AsyncIterator[bytes]:
    """`result` for every request of the input file `chunks`: a batch that ended before it ran."""
    async for _, raw in split_lines(chunks):
        if raw.strip():
            custom_id = custom_id_of(raw)
            yield jsonbody.dumps({"custom_id": custom_id, "result": result}).encode() + b"\n"
