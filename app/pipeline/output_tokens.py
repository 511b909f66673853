"""The most output tokens a request line may ask for, by the field its endpoint reads: a
batch's output bound before it runs (POST /v1/batches/estimate)."""

from __future__ import annotations

from typing import Any

from app.core.endpoints import CHAT_COMPLETIONS, COMPLETIONS, MESSAGES, RESPONSES

# The fields each generating endpoint takes its cap from, first given first (vLLM's chat
# serving prefers max_completion_tokens to the older max_tokens).
_CAP_FIELDS = {
    CHAT_COMPLETIONS: ("max_completion_tokens", "max_tokens"),
    COMPLETIONS: ("max_tokens",),
    RESPONSES: ("max_output_tokens",),
    MESSAGES: ("max_tokens",),
}


def generates(endpoint: str) -> bool:
    """Whether `endpoint`'s lines answer with output tokens (pooling and audio lines do not)."""
    return endpoint in _CAP_FIELDS


def requested_cap(endpoint: str, body: dict[str, Any]) -> int | None:
    """The line's own cap on its output tokens, or None when it sets none (the model's limit
    then bounds it)."""
    for name in _CAP_FIELDS.get(endpoint, ()):
        value = body.get(name)
        if isinstance(value, int) and not isinstance(value, bool):
            return value
    return None
