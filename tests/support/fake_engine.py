"""A deterministic engine for the in-process tier: it implements :class:`app.engine.protocol.Engines`
with no model, so the app runs batches in the test's own process (tests/support/app_server.py).

It serves the suite's two model names (tests/support/batches.py): ``batchd-tiny-chat`` (chat
and text completions, Responses, and Anthropic's messages) and ``all-MiniLM-L6-v2`` (embeddings). It checks
lines as every real engine does (:mod:`app.engine.line_checks`), and that a chat line's
``messages`` is a list. A line answers at once unless its prompt (the last message's text, the
``prompt`` or the ``input``) carries a directive:

- ``fake:fail``: a 500 in vLLM's error envelope; ``fake:400``: a 400 (a bad request);
- ``fake:timeout``: the 504 ``request_timeout`` an upstream answers when a line runs out of time;
- ``fake:stall``: no answer until the line is aborted or cancelled (a batch cancelled mid-run);
- ``fake:hold``: no answer until the test calls :meth:`FakeEngines.release` (lines seen in flight).
- ``fake:slow-count``: its prompt tokens are not counted (an estimate, a token limit's count waits)
  while the test holds counting (:meth:`FakeEngines.hold_counting`).
- ``fake:incomplete``: on ``/v1/responses``, a 200 Response with ``status: "incomplete"``
  (``max_output_tokens`` reached).

A completion's text is ``echo: <prompt>``; usage counts the prompt's characters' estimate
(:func:`app.engine.prompt_tokens.estimate_all`, the same count validation charged) and
``max_tokens`` (default 2) completion tokens.
"""

from __future__ import annotations

import asyncio
import threading
from collections.abc import Sequence
from typing import Any

from app.core.endpoints import CHAT_COMPLETIONS, COMPLETIONS, EMBEDDINGS, MESSAGES, RESPONSES, normalize_endpoint
from app.core.errors import error_envelope
from app.core.statuses import EngineState
from app.engine.errors import RequestAborted
from app.engine.line_checks import common_line_problem
from app.engine.prompt_tokens import estimate_all
from app.engine.protocol import UpstreamStatus
from app.engine.results import INVALID_REQUEST, MODEL_NOT_FOUND, LineProblem, LineResult, Usage
from app.scheduling.residency import NO_DEADLINE, Urgency
from tests.support.batches import CHAT_MODEL, EMBED_MODEL

MODELS = {CHAT_MODEL: {CHAT_COMPLETIONS, COMPLETIONS, MESSAGES, RESPONSES}, EMBED_MODEL: {EMBEDDINGS}}
CONCURRENCY = 8
_CREATED = 1_700_000_000


def prompt_of(body: dict[str, Any]) -> str:
    """The text a directive is read from."""
    messages = body.get("messages")
    if isinstance(messages, list) and messages and isinstance(messages[-1], dict):
        content = messages[-1].get("content")
        return content if isinstance(content, str) else str(content)
    for field in ("prompt", "input"):
        if field in body:
            return str(body[field])
    return ""


class FakeEngines:
    """The models above (or those of them `served` names), answered by the rules in the module's
    docstring."""

    ready = True

    def __init__(self, served: tuple[str, ...] = tuple(MODELS)) -> None:
        self.models = {name: MODELS[name] for name in served}
        self._released = threading.Event()  # set from the test's thread, read in the app's loop
        self._aborted: dict[str, asyncio.Event] = {}
        self._counting = threading.Event()
        self._counting.set()
        self.executed = 0

    def release(self) -> None:
        """Let every ``fake:hold`` line, running or to come, answer."""
        self._released.set()

    def hold(self) -> None:
        """``fake:hold`` lines wait again (after :meth:`release`)."""
        self._released.clear()

    def hold_counting(self) -> None:
        """Counting the tokens of ``fake:slow-count`` lines waits until :meth:`release_counting`."""
        self._counting.clear()

    def release_counting(self) -> None:
        self._counting.set()

    @property
    def in_flight(self) -> int:
        return len(self._aborted)

    def model_cards(self) -> list[dict[str, Any]]:
        return [{"id": m, "object": "model", "created": _CREATED, "owned_by": "batchd"} for m in self.models]

    def engine_state(self, model: str) -> EngineState:
        return EngineState.READY if model in self.models else EngineState.STOPPED

    def engine_ready(self, model: str) -> bool:
        return model in self.models

    def endpoints_for(self, model: str) -> set[str]:
        return set(self.models.get(model, ()))

    def suggested_concurrency(self, model: str) -> int:
        return CONCURRENCY

    def status(self) -> UpstreamStatus:
        return {}

    def validate_line(self, endpoint: str, body: Any) -> LineProblem | None:
        problem, canonical = common_line_problem(endpoint, body, self.models.get, list(self.models))
        if problem is None and canonical in (CHAT_COMPLETIONS, MESSAGES) and not isinstance(body.get("messages"), list):
            return LineProblem(INVALID_REQUEST, "body.messages must be a list.", "body.messages")
        return problem

    def lines_pass(self, endpoint: str, model: str, bodies: Sequence[dict[str, Any]]) -> bool:
        return all(self.validate_line(endpoint, body) is None for body in bodies)

    async def count_prompt_tokens(self, endpoint: str, bodies: Sequence[Any]) -> list[int]:
        if any("fake:slow-count" in prompt_of(body) for body in bodies):
            while not self._counting.is_set():
                await asyncio.sleep(0.01)
        return estimate_all(endpoint, bodies)

    async def execute(
        self, endpoint: str, body: Any, request_id: str, priority: int = 0, *, urgency: Urgency = NO_DEADLINE
    ) -> LineResult:
        problem = self.validate_line(endpoint, body)
        if problem is not None:  # a Message Batch's lines reach here unchecked, as upstreams answer them
            status, kind = (404, "NotFoundError") if problem.code == MODEL_NOT_FOUND else (400, "BadRequestError")
            return LineResult(status, error_envelope(problem.message, kind, param=problem.param, code=problem.code))
        aborted = self._aborted[request_id] = asyncio.Event()
        try:
            return await self._answer(normalize_endpoint(endpoint) or endpoint, body, request_id, aborted)
        finally:
            del self._aborted[request_id]
            self.executed += 1

    async def _answer(self, endpoint: str, body: dict[str, Any], request_id: str, aborted: asyncio.Event) -> LineResult:
        prompt = prompt_of(body)
        if "fake:stall" in prompt:
            await aborted.wait()
        while "fake:hold" in prompt and not self._released.is_set() and not aborted.is_set():
            await asyncio.sleep(0.01)
        if aborted.is_set():
            raise RequestAborted(request_id)
        if "fake:fail" in prompt:
            return _error(500, "The fake engine failed this line.", "InternalServerError", None)
        if "fake:400" in prompt:
            return _error(400, "The fake engine refused this line.", "BadRequestError", None)
        if "fake:timeout" in prompt:
            return _error(504, "The request did not finish in time.", "TimeoutError", "request_timeout")
        prompt_tokens = estimate_all(endpoint, [body])[0]
        if endpoint == EMBEDDINGS:
            answer = _embeddings(body, prompt_tokens)
        elif endpoint == MESSAGES:
            answer = _message(body, prompt, request_id, prompt_tokens)
        elif endpoint == RESPONSES:
            answer = _response(body, prompt, request_id, prompt_tokens)
        else:
            answer = _completion(endpoint, body, prompt, request_id, prompt_tokens)
        return LineResult(200, answer, Usage.from_body(endpoint, answer))

    async def abort(self, request_id: str) -> bool:
        event = self._aborted.get(request_id)
        if event is None:
            return False
        event.set()
        return True

    async def shutdown(self) -> None:
        for event in self._aborted.values():
            event.set()


def _error(status: int, message: str, kind: str, code: str | None) -> LineResult:
    return LineResult(status, error_envelope(message, kind, code=code))


def _completion(endpoint: str, body: dict[str, Any], prompt: str, request_id: str, prompt_tokens: int) -> dict:
    tokens = body.get("max_tokens") or body.get("max_completion_tokens") or 2
    usage = {"prompt_tokens": prompt_tokens, "completion_tokens": tokens, "total_tokens": prompt_tokens + tokens}
    text = f"echo: {prompt}"
    if endpoint == COMPLETIONS:
        choice: dict[str, Any] = {"index": 0, "text": text, "finish_reason": "length", "logprobs": None}
        kind = "text_completion"
    else:
        choice = {"index": 0, "message": {"role": "assistant", "content": text}, "finish_reason": "length"}
        kind = "chat.completion"
    return {
        "id": f"fake-{request_id}",
        "object": kind,
        "created": _CREATED,
        "model": body["model"],
        "choices": [choice],
        "usage": usage,
    }


def _message(body: dict[str, Any], prompt: str, request_id: str, prompt_tokens: int) -> dict:
    return {
        "id": f"msg_fake_{request_id}",
        "type": "message",
        "role": "assistant",
        "model": body["model"],
        "content": [{"type": "text", "text": f"echo: {prompt}"}],
        "stop_reason": "max_tokens",
        "stop_sequence": None,
        "usage": {"input_tokens": prompt_tokens, "output_tokens": body.get("max_tokens") or 2},
    }


def _response(body: dict[str, Any], prompt: str, request_id: str, prompt_tokens: int) -> dict:
    """vLLM's Response body (its own id and time, which batchd replaces with the response's)."""
    tokens = body.get("max_output_tokens") or 2
    text = {"type": "output_text", "text": f"echo: {prompt}", "annotations": [], "logprobs": None}
    message = {"id": f"msg_{request_id}", "type": "message", "role": "assistant", "status": "completed"}
    incomplete = "fake:incomplete" in prompt
    return {
        "id": f"resp_fake_{request_id}",
        "object": "response",
        "created_at": _CREATED,
        "model": body["model"],
        "status": "incomplete" if incomplete else "completed",
        "output": [{**message, "content": [text]}],
        "usage": {
            "input_tokens": prompt_tokens,
            "input_tokens_details": {"cached_tokens": 0},
            "output_tokens": tokens,
            "output_tokens_details": {"reasoning_tokens": 0},
            "total_tokens": prompt_tokens + tokens,
        },
        "error": None,
        "incomplete_details": {"reason": "max_output_tokens"} if incomplete else None,
        "background": False,
    }


def _embeddings(body: dict[str, Any], prompt_tokens: int) -> dict:
    inputs = body.get("input")
    count = len(inputs) if isinstance(inputs, list) and inputs and not isinstance(inputs[0], int) else 1
    data = [{"object": "embedding", "index": i, "embedding": [0.0, 0.5, 1.0]} for i in range(count)]
    return {
        "object": "list",
        "data": data,
        "model": body["model"],
        "usage": {"prompt_tokens": prompt_tokens, "total_tokens": prompt_tokens},
    }
