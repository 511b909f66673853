"""A finished flex result as the server-sent events a streaming client reads: chat completions'
`chat.completion.chunk` events then `data: [DONE]`, Responses' `response.created`,
`response.output_text.delta` and `response.completed`. The stream arrives once the line is done
(batchd runs the line whole; it is not an online server)."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

from app.core import jsonbody
from app.core.endpoints import CHAT_COMPLETIONS, RESPONSES
from app.core.statuses import ResponseStatus, WebhookEventType

STREAMED = (CHAT_COMPLETIONS, RESPONSES)


def _event(data: Any, name: str | None = None) -> bytes:
    head = f"event: {name}\n" if name else ""
    return (head + "data: " + jsonbody.dumps(data) + "\n\n").encode()


def events(endpoint: str, body: dict[str, Any], request: dict[str, Any]) -> Iterator[bytes]:
    if endpoint == RESPONSES:
        yield from _response_events(body)
    else:
        yield from _chat_events(body, request)


def _chat_events(body: dict[str, Any], request: dict[str, Any]) -> Iterator[bytes]:
    head = {
        "id": body.get("id"),
        "object": "chat.completion.chunk",
        "created": body.get("created"),
        "model": body.get("model"),
        "service_tier": body.get("service_tier"),
        "system_fingerprint": body.get("system_fingerprint"),
    }
    choices = [c for c in body.get("choices") or [] if isinstance(c, dict)]
    for choice in choices:
        message = choice.get("message")
        message = message if isinstance(message, dict) else {}
        delta = {name: value for name, value in message.items() if value is not None}
        if isinstance(delta.get("tool_calls"), list):
            delta["tool_calls"] = [{"index": i, **call} for i, call in enumerate(delta["tool_calls"])]
        first = {
            "index": choice.get("index", 0),
            "delta": delta,
            "logprobs": choice.get("logprobs"),
            "finish_reason": None,
        }
        yield _event({**head, "choices": [first]})
        last = {
            "index": choice.get("index", 0),
            "delta": {},
            "logprobs": None,
            "finish_reason": choice.get("finish_reason"),
        }
        yield _event({**head, "choices": [last]})
    options = request.get("stream_options")
    if isinstance(options, dict) and options.get("include_usage") is True:
        yield _event({**head, "choices": [], "usage": body.get("usage")})
    yield b"data: [DONE]\n\n"


def _response_events(body: dict[str, Any]) -> Iterator[bytes]:
    sequence = 0

    def event(kind: str, **fields: Any) -> bytes:
        nonlocal sequence
        data = {"type": kind, "sequence_number": sequence, **fields}
        sequence += 1
        return _event(data, kind)

    created = {**body, "status": ResponseStatus.IN_PROGRESS, "output": [], "usage": None}
    yield event("response.created", response=created)
    for output_index, item in enumerate(body.get("output") or []):
        if not isinstance(item, dict) or item.get("type") != "message":
            continue
        for content_index, part in enumerate(item.get("content") or []):
            if isinstance(part, dict) and part.get("type") == "output_text":
                yield event(
                    "response.output_text.delta",
                    item_id=item.get("id"),
                    output_index=output_index,
                    content_index=content_index,
                    delta=part.get("text") or "",
                    logprobs=[],
                )
    yield event(WebhookEventType.RESPONSE_COMPLETED, response=body)  # the stream event is named as the webhook event
