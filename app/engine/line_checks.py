"""The engine-independent checks of a batch line, shared by in-process and upstream models:
a known endpoint, an object body, a served model that serves that endpoint, no streaming, and
for audio lines a ``file_url`` batchd can fetch."""

from __future__ import annotations

from collections.abc import Callable, Iterable, Sequence
from itertools import repeat
from typing import Any

from app.core.endpoints import ALL_ENDPOINTS, AUDIO_ENDPOINTS, normalize_endpoint
from app.engine.audio import file_url_problem
from app.engine.results import (
    INVALID_REQUEST,
    MISSING_REQUIRED_PARAMETER,
    MODEL_NOT_FOUND,
    STREAMING_UNSUPPORTED,
    UNSUPPORTED_ENDPOINT,
    URL_MISMATCH,
    LineProblem,
)


def common_lines_pass(
    endpoint: str,
    bodies: Sequence[dict[str, Any]],
    endpoints_of: Callable[[str], Iterable[str] | None],
    served: Iterable[str],
) -> bool:
    """`common_line_problem` passes every one of `bodies` (objects naming one model): past the
    model, its verdict hangs only on `stream` and, for audio, the body's `file_url`, so one
    body answers for the rest unless one streams or the endpoint takes audio."""
    if not bodies:
        return True
    try:  # `True in` also finds a stream of 1: that only sends the bodies one by one
        streaming = True in set(map(dict.get, bodies, repeat("stream")))
    except TypeError:  # a stream that is a list or an object
        streaming = True
    if streaming or normalize_endpoint(endpoint) in AUDIO_ENDPOINTS:
        return all(common_line_problem(endpoint, body, endpoints_of, served)[0] is None for body in bodies)
    return common_line_problem(endpoint, bodies[0], endpoints_of, served)[0] is None


def common_line_problem(
    endpoint: str,
    body: Any,
    endpoints_of: Callable[[str], Iterable[str] | None],
    served: Iterable[str],
) -> tuple[LineProblem | None, str | None]:
    """``(problem, canonical endpoint)``; ``endpoints_of(model)`` is None for a model not
    served here, ``served`` names the models that are (for the message)."""
    canonical = normalize_endpoint(endpoint)
    if canonical is None:
        supported = ", ".join(sorted(ALL_ENDPOINTS))
        return LineProblem(URL_MISMATCH, f"Unsupported url {endpoint!r}; supported: {supported}.", "url"), None
    if not isinstance(body, dict):
        return LineProblem(INVALID_REQUEST, "body must be a JSON object.", "body"), canonical
    model = body.get("model")
    if model is None:
        return LineProblem(MISSING_REQUIRED_PARAMETER, "Missing required parameter: 'model'.", "body.model"), canonical
    if not isinstance(model, str):
        return LineProblem(INVALID_REQUEST, "body.model must be a string.", "body.model"), canonical
    endpoints = endpoints_of(model)
    if endpoints is None:
        return LineProblem(
            MODEL_NOT_FOUND,
            f"The model {model!r} does not exist. Served models: {', '.join(served)}.",
            "body.model",
        ), canonical
    endpoints = set(endpoints)
    if canonical not in endpoints:
        return LineProblem(
            UNSUPPORTED_ENDPOINT,
            f"The model {model!r} does not support {canonical} (it supports: "
            f"{', '.join(sorted(endpoints)) or 'none'}).",
            "url",
        ), canonical
    if body.get("stream") is True:
        return LineProblem(
            STREAMING_UNSUPPORTED,
            "Streaming is not supported in batch requests; omit stream or set it to false.",
            "body.stream",
        ), canonical
    if canonical in AUDIO_ENDPOINTS and (found := file_url_problem(body)) is not None:
        return LineProblem(INVALID_REQUEST, found[1], found[0]), canonical
    return None, canonical
