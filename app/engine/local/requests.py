"""vLLM's request models per batch endpoint, and schema checks of a line body.

A body is parsed with the very pydantic type the ``vllm serve`` route declares
for that URL, so a line that validates here is one vLLM's server would accept,
and errors are reported the way its 400 handler reports them.
"""

from __future__ import annotations

import re
from typing import Any

from pydantic import TypeAdapter, ValidationError

from app.core.endpoints import (
    CHAT_COMPLETIONS,
    COMPLETIONS,
    EMBEDDINGS,
    MESSAGES,
    RERANK,
    RESPONSES,
    SCORE,
    TRANSCRIPTIONS,
    TRANSLATIONS,
)
from app.engine.results import INVALID_REQUEST, LineProblem
from app.engine.vllm_api import (
    AnthropicMessagesRequest,
    BatchTranscriptionRequest,
    BatchTranslationRequest,
    ChatCompletionRequest,
    CompletionRequest,
    EmbeddingRequest,
    RerankRequest,
    ResponsesRequest,
    ScoreRequest,
    VLLMValidationError,
    clean_loc_for_param,
)

REQUEST_TYPES: dict[str, Any] = {
    CHAT_COMPLETIONS: ChatCompletionRequest,
    COMPLETIONS: CompletionRequest,
    EMBEDDINGS: EmbeddingRequest,
    SCORE: ScoreRequest,
    RERANK: RerankRequest,
    RESPONSES: ResponsesRequest,
    MESSAGES: AnthropicMessagesRequest,
    # vLLM run-batch's line types: the form fields of the route, with `file_url` for `file`.
    TRANSCRIPTIONS: BatchTranscriptionRequest,
    TRANSLATIONS: BatchTranslationRequest,
}
_ADAPTERS: dict[str, TypeAdapter[Any]] = {ep: TypeAdapter(t) for ep, t in REQUEST_TYPES.items()}

# Embeddings in these formats come back as a raw byte stream, not a JSON body,
# so they cannot be written to a batch output line.
_BYTE_ENCODINGS = frozenset({"bytes", "bytes_only"})

# Union request types (embeddings, score) put the branch's class name in an
# error's location; it means nothing to an API user.
_CLASS_NAME = re.compile(r"^[A-Z][A-Za-z0-9]*$")


def parse_request(endpoint: str, body: dict[str, Any]) -> Any:
    """Parse ``body`` into vLLM's request object for canonical ``endpoint``.

    Raises ``pydantic.ValidationError`` like FastAPI's body parsing would.
    """
    return _ADAPTERS[endpoint].validate_python(body)


def body_problem(endpoint: str, body: dict[str, Any]) -> LineProblem | None:
    """Schema problems of ``body`` for ``endpoint`` (no engine involved)."""
    try:
        request = parse_request(endpoint, body)
    except ValidationError as exc:
        param, message = describe_validation_error(exc)
        return LineProblem(INVALID_REQUEST, message, param)
    except Exception as exc:  # a validator raising outside pydantic's wrapping
        return LineProblem(INVALID_REQUEST, str(exc) or type(exc).__name__, "body")
    if endpoint == EMBEDDINGS and getattr(request, "encoding_format", None) in _BYTE_ENCODINGS:
        return LineProblem(
            INVALID_REQUEST,
            f"encoding_format {request.encoding_format!r} is not supported in batch requests; use 'float' or 'base64'.",
            "body.encoding_format",
        )
    return None


def describe_validation_error(exc: ValidationError) -> tuple[str, str]:
    """``(param, message)`` for the first error, ``param`` as ``body.<path>``.

    Like vLLM's handler, a :class:`VLLMValidationError` raised by a validator
    names the parameter itself; otherwise the error location is used.
    """
    errors = exc.errors(include_url=False)
    if not errors:
        return "body", "Invalid request body."
    first = errors[0]
    for error in errors:
        ctx_error = (error.get("ctx") or {}).get("error")
        if isinstance(ctx_error, VLLMValidationError) and ctx_error.parameter:
            first = error
            break
    ctx_error = (first.get("ctx") or {}).get("error")
    if isinstance(ctx_error, VLLMValidationError) and ctx_error.parameter:
        param = f"body.{ctx_error.parameter}"
    else:
        loc = tuple(part for part in first.get("loc", ()) if not _CLASS_NAME.match(str(part)))
        param = clean_loc_for_param(("body", *loc))
    message = f"{param}: {first.get('msg', 'invalid value')}"
    if len(errors) > 1:
        message += f" (and {len(errors) - 1} more error{'s' if len(errors) > 2 else ''})"
    return param, message
