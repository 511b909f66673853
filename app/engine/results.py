"""Plain values the engine layer hands to the rest of batchd (no vLLM types).

- :class:`LineProblem`: why a line would be rejected at validation time.
- :class:`LineResult`: what executing a line produced (HTTP status + body).
- :class:`Usage`: token counts taken from a response body, for batch totals.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from app.core.endpoints import AUDIO_ENDPOINTS, CHAT_COMPLETIONS, COMPLETIONS, MESSAGES, RESPONSES
from app.core.line_errors import LineErrorCode

# LineProblem codes (the `code` of a BatchError during file validation): the one set of line
# error codes (app/core/line_errors.py), under the names the engine checks use.
INVALID_REQUEST = LineErrorCode.INVALID_REQUEST  # body does not match the endpoint's schema
STREAMING_UNSUPPORTED = LineErrorCode.STREAMING_UNSUPPORTED  # body.stream is true
MODEL_NOT_FOUND = LineErrorCode.MODEL_NOT_FOUND  # body.model is not served here
MISSING_REQUIRED_PARAMETER = LineErrorCode.MISSING_REQUIRED_PARAMETER  # no body.model
URL_MISMATCH = LineErrorCode.URL_MISMATCH  # the line's url is not a batch endpoint batchd runs
UNSUPPORTED_ENDPOINT = LineErrorCode.UNSUPPORTED_ENDPOINT  # the model cannot serve that url


@dataclass(frozen=True, slots=True)
class LineProblem:
    """A reason to reject a batch line before running it.

    ``param`` is the dotted path of the offending field as the OpenAI batch
    error reports it (``body.messages``, ``body.stream``, ``url``).
    """

    code: str
    message: str
    param: str | None = None


@dataclass(frozen=True, slots=True)
class Usage:
    """Token counts of one executed line (zeros where the endpoint has none), and the audio
    seconds of a speech-to-text line."""

    input_tokens: int = 0
    output_tokens: int = 0
    cached_tokens: int = 0
    reasoning_tokens: int = 0
    seconds: int = 0

    @property
    def total_tokens(self) -> int:
        return self.input_tokens + self.output_tokens

    @classmethod
    def from_body(cls, endpoint: str, body: dict[str, Any]) -> Usage:
        """Read usage from a successful response body of ``endpoint``."""
        usage = body.get("usage")
        if not isinstance(usage, dict):
            return cls()
        if endpoint == RESPONSES:
            return cls(
                input_tokens=_int(usage.get("input_tokens")),
                output_tokens=_int(usage.get("output_tokens")),
                cached_tokens=_int(_get(usage, "input_tokens_details", "cached_tokens")),
                reasoning_tokens=_int(_get(usage, "output_tokens_details", "reasoning_tokens")),
            )
        if endpoint in AUDIO_ENDPOINTS:  # vLLM's `{"type": "duration", "seconds": n}`
            return cls(seconds=_int(usage.get("seconds")))
        if endpoint == MESSAGES:
            return cls(
                input_tokens=_int(usage.get("input_tokens")),
                output_tokens=_int(usage.get("output_tokens")),
                cached_tokens=_int(usage.get("cache_read_input_tokens")),
            )
        # Embeddings, score and rerank report prompt_tokens only.
        output = _int(usage.get("completion_tokens")) if endpoint in (CHAT_COMPLETIONS, COMPLETIONS) else 0
        return cls(
            input_tokens=_int(usage.get("prompt_tokens")),
            output_tokens=output,
            cached_tokens=_int(_get(usage, "prompt_tokens_details", "cached_tokens")),
            reasoning_tokens=_int(_get(usage, "completion_tokens_details", "reasoning_tokens")),
        )


@dataclass(frozen=True, slots=True)
class LineResult:
    """The outcome of one executed line, as ``vllm serve`` would have answered it.

    ``body`` is the JSON object of the HTTP response: the endpoint's response on
    200, otherwise vLLM's ``{"error": {message, type, param, code}}`` envelope.
    """

    status_code: int
    body: dict[str, Any]
    usage: Usage = field(default_factory=Usage)

    @property
    def ok(self) -> bool:
        return self.status_code == 200


def _get(d: Any, *keys: str) -> Any:
    for key in keys:
        if not isinstance(d, dict):
            return None
        d = d.get(key)
    return d


def _int(value: Any) -> int:
    return value if isinstance(value, int) and not isinstance(value, bool) else 0
