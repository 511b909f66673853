"""The prompt of a batch line as text, for counting its tokens at validation (the enqueued-token
limit), and the estimate used where no tokenizer is at hand.

Chat, Anthropic Messages and responses messages are counted from their text parts (an in-process model renders its
chat template instead); token-id prompts count their ids. The estimate is OpenAI's rule of
thumb, a token per 4 bytes of UTF-8 text, rounded up per line."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from app.core.endpoints import CHAT_COMPLETIONS, COMPLETIONS, EMBEDDINGS, MESSAGES, RERANK, RESPONSES, SCORE

BYTES_PER_TOKEN = 4

# The body fields that hold each endpoint's input.
_INPUT_FIELDS = {
    CHAT_COMPLETIONS: ("messages",),
    MESSAGES: ("system", "messages"),  # Anthropic's: the system prompt is a field of its own
    COMPLETIONS: ("prompt",),
    EMBEDDINGS: ("input",),
    RESPONSES: ("instructions", "input"),
    SCORE: ("text_1", "text_2", "queries", "documents", "data_1", "data_2"),
    RERANK: ("query", "documents"),
}


def prompt_parts(endpoint: str, body: Any) -> tuple[list[str], int]:
    """The texts of a line's prompt, and the number of tokens it gives as token ids."""
    texts: list[str] = []
    ids = 0
    if isinstance(body, dict):
        for name in _INPUT_FIELDS.get(endpoint, ()):
            ids += _collect(body.get(name), texts)
    return texts, ids


def _collect(value: Any, texts: list[str]) -> int:
    if isinstance(value, str):
        texts.append(value)
        return 0
    if isinstance(value, list):
        if value and all(isinstance(v, int) for v in value):
            return len(value)
        return sum(_collect(v, texts) for v in value)
    if isinstance(value, dict):
        # A message ({"role", "content"}), a content part ({"type": "text", "text"}) or a document.
        return sum(_collect(value.get(k), texts) for k in ("content", "text", "input_text"))
    return 0


def estimate(endpoint: str, body: Any) -> int:
    texts, ids = prompt_parts(endpoint, body)
    size = sum(len(t.encode()) for t in texts)
    return ids + -(-size // BYTES_PER_TOKEN)


def estimate_all(endpoint: str, bodies: Sequence[Any]) -> list[int]:
    return [estimate(endpoint, body) for body in bodies]
