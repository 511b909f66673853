"""One running model: its ``AsyncLLM`` plus vLLM's serving objects for it.

:meth:`ModelEngine.run` answers one request body the way the matching
``vllm serve`` route does — same handler call, same status code, same JSON
body, same mapping of exceptions to error envelopes — minus HTTP itself.
"""

from __future__ import annotations

import asyncio
import copy
import signal
import threading
from collections.abc import Sequence
from http import HTTPStatus
from io import BytesIO
from types import SimpleNamespace
from typing import Any

from fastapi.exceptions import RequestValidationError
from pydantic import ValidationError
from starlette.datastructures import State, UploadFile
from starlette.responses import JSONResponse, Response, StreamingResponse

from app.core import jsonbody
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
from app.engine.audio import AudioFetchError, audio_slot, fetch_audio, fetch_error_reply
from app.engine.config.specs import ModelSpec
from app.engine.local.fast_chat import FastChat
from app.engine.local.requests import parse_request
from app.engine.prompt_tokens import estimate_all, prompt_parts
from app.engine.vllm_api import (
    AnthropicError,
    AnthropicErrorResponse,
    AsyncLLM,
    CoreEngineProcManager,
    ErrorResponse,
    TranscriptionRequest,
    TranslationRequest,
    VllmEngineDeadError,
    create_error_response,
    validation_exception_handler,
)

# The app.state attribute holding each endpoint's handler (as vLLM's routers read it).
_HANDLER_ATTRS: dict[str, str] = {
    CHAT_COMPLETIONS: "openai_serving_chat",
    COMPLETIONS: "openai_serving_completion",
    RESPONSES: "openai_serving_responses",
    EMBEDDINGS: "serving_embedding",
    SCORE: "serving_scores",
    RERANK: "serving_scores",
    MESSAGES: "anthropic_serving_messages",
    TRANSCRIPTIONS: "openai_serving_transcription",
    TRANSLATIONS: "openai_serving_translation",
}

Reply = tuple[int, dict[str, Any]]


class ModelEngine:
    """A started vLLM engine for one served model name."""

    def __init__(
        self,
        *,
        spec: ModelSpec,
        llm: AsyncLLM,
        state: State,
        supported_tasks: tuple[str, ...],
    ) -> None:
        self.spec = spec
        self.llm = llm
        self.state = state
        self.supported_tasks = supported_tasks
        self.endpoints: frozenset[str] = frozenset(
            endpoint for endpoint, attr in _HANDLER_ATTRS.items() if getattr(state, attr, None) is not None
        )
        chat_handler = getattr(state, _HANDLER_ATTRS[CHAT_COMPLETIONS], None)
        # Plain chat lines skip the serving class when the model allows it (fast_chat.py).
        self.fast_chat = FastChat.for_handler(llm, chat_handler) if chat_handler is not None else None
        self._counting_lock = threading.Lock()
        self._counting_tokenizer: Any = None
        # Stand-in for the FastAPI request vLLM's exception handlers inspect.
        self._handler_request = SimpleNamespace(app=SimpleNamespace(state=state), state=SimpleNamespace())

    @property
    def name(self) -> str:
        return self.spec.name

    @property
    def max_num_seqs(self) -> int:
        return int(self.llm.vllm_config.scheduler_config.max_num_seqs)

    @property
    def schedules_by_priority(self) -> bool:
        return self.llm.vllm_config.scheduler_config.policy == "priority"

    @property
    def errored(self) -> bool:
        return bool(self.llm.errored)

    def exit_cause(self) -> str:
        """How the engine core process ended ("was killed by SIGKILL", "exited with code 1"),
        from vLLM's process manager, for the log line of a restart."""
        manager = getattr(getattr(self.llm.engine_core, "resources", None), "engine_manager", None)
        finished = manager.finished_procs() if isinstance(manager, CoreEngineProcManager) else {}
        causes = [_exit_cause(code) for code in finished.values() if code != 0]
        return ", ".join(causes) or "stopped answering"

    async def run(self, endpoint: str, body: dict[str, Any], priority: int = 0) -> Reply:
        """Answer ``body`` sent to canonical ``endpoint`` as ``vllm serve`` would, queued in
        the engine at ``priority`` (batchd's, from the batch's deadline, in place of any the
        line names) when the engine schedules by priority.

        Raises vLLM's ``EngineDeadError`` (the caller must not record a line
        for it) and ``CancelledError``; every other failure becomes a reply.
        """
        try:
            request = parse_request(endpoint, body)
        except ValidationError as exc:
            return await self._validation_reply(exc)
        if priority and self.schedules_by_priority and hasattr(request, "priority"):
            request.priority = priority
        if getattr(request, "stream", False):
            # run_batch refuses streams too: a batch line holds one JSON body.
            return _reply_for(
                create_error_response(
                    "Streaming is not supported in batch requests; omit stream or set it to false.",
                    param="stream",
                )
            )
        try:
            if endpoint == CHAT_COMPLETIONS and self.fast_chat is not None:
                line = await self.fast_chat.prepare(request)
                if line is not None:
                    answer = await self.fast_chat.run(line)
                    return _reply_for(answer) if isinstance(answer, ErrorResponse) else (HTTPStatus.OK, answer)
            return await self._dispatch(endpoint, request)
        except VllmEngineDeadError:
            raise
        except Exception as exc:
            # What vLLM's generic exception handler answers.
            return _reply_for(create_error_response(exc))

    async def _dispatch(self, endpoint: str, request: Any) -> Reply:
        handler = getattr(self.state, _HANDLER_ATTRS[endpoint], None)
        if handler is None:
            # `vllm serve` has no such route for this model: 404.
            return _reply_for(
                create_error_response(
                    f"The model `{self.name}` does not support {endpoint}.",
                    err_type="NotFoundError",
                    status_code=HTTPStatus.NOT_FOUND,
                    param="model",
                )
            )
        if endpoint == CHAT_COMPLETIONS:
            result = await handler.create_chat_completion(request, None)
        elif endpoint == COMPLETIONS:
            result = await handler.create_completion(request, None)
        elif endpoint == RESPONSES:
            result = await handler.create_responses(request, None)
        elif endpoint == MESSAGES:
            return await _messages_reply(handler, request)
        elif endpoint in (TRANSCRIPTIONS, TRANSLATIONS):
            return await _speech_reply(handler, endpoint, request)
        else:
            # Pooling handlers return a finished HTTP response and raise on error.
            return _response_reply(await handler(request, None))

        if isinstance(result, ErrorResponse):
            return _reply_for(result)
        if not hasattr(result, "model_dump"):
            await _close_stream(result)
            raise ValueError("The handler returned a stream for a non-streaming request.")
        if endpoint == RESPONSES:
            # The responses route dumps by alias in JSON mode; the others do not.
            return HTTPStatus.OK, _render(result.model_dump(mode="json", by_alias=True))
        return HTTPStatus.OK, _render(result.model_dump())

    async def _validation_reply(self, exc: ValidationError) -> Reply:
        # FastAPI reports body errors under a "body" location prefix.
        errors = [{**e, "loc": ("body", *e["loc"])} for e in exc.errors(include_url=False)]
        response = await validation_exception_handler(self._handler_request, RequestValidationError(errors))
        return _response_reply(response)

    def count_prompt_tokens(self, endpoint: str, bodies: Sequence[Any]) -> list[int]:
        """Prompt tokens of each body with this model's tokenizer, chat lines through its chat
        template, all texts encoded in one batched call. Blocking: run it in a thread. A copy of
        the tokenizer, so the engine's own is never used from two threads at once."""
        with self._counting_lock:
            if self._counting_tokenizer is None:
                tokenizer = self.llm.tokenizer
                self._counting_tokenizer = copy.deepcopy(tokenizer) if tokenizer is not None else False
            tokenizer = self._counting_tokenizer
            if tokenizer is False:
                return estimate_all(endpoint, bodies)
            counts: list[int] = []
            owners: list[int] = []
            texts: list[str] = []
            templated: list[str] = []
            templated_owners: list[int] = []
            for i, body in enumerate(bodies):
                rendered = _chat_prompt(tokenizer, body) if endpoint == CHAT_COMPLETIONS else None
                if rendered is not None:
                    templated.append(rendered)
                    templated_owners.append(i)
                    counts.append(0)
                    continue
                parts, ids = prompt_parts(endpoint, body)
                counts.append(ids)
                texts.extend(parts)
                owners.extend([i] * len(parts))
            for batch, batch_owners, special in ((texts, owners, True), (templated, templated_owners, False)):
                if batch:
                    # Without the attention masks nobody reads: half the time of the call.
                    encoded = tokenizer(
                        batch, add_special_tokens=special, return_attention_mask=False, return_token_type_ids=False
                    )["input_ids"]
                    for owner, ids in zip(batch_owners, encoded, strict=True):
                        counts[owner] += len(ids)
            return counts

    def shutdown(self) -> None:
        """Stop the engine core processes (blocking, bounded by vLLM's timeout)."""
        if self.fast_chat is not None:
            self.fast_chat.shutdown()
        shutdown_engine(self.llm, self.llm.vllm_config.shutdown_timeout)

    @property
    def can_sleep(self) -> bool:
        """Whether vLLM's sleep mode is on for this engine (CUDA, engines on demand)."""
        return bool(getattr(self.llm.vllm_config.model_config, "enable_sleep_mode", False))

    async def sleep(self) -> None:
        """Sleep at level 1: weights offloaded to host memory, the KV cache freed."""
        await self.llm.sleep(level=1)

    async def wake(self) -> None:
        await self.llm.wake_up()

    async def probe(self) -> None:
        """A test generation (or embedding) after a wake: raises unless the engine answers 200."""
        if COMPLETIONS in self.endpoints:
            endpoint, body = COMPLETIONS, {"model": self.name, "prompt": "ping", "max_tokens": 1}
        elif EMBEDDINGS in self.endpoints:
            endpoint, body = EMBEDDINGS, {"model": self.name, "input": "ping"}
        else:
            return  # nothing cheap to ask (audio, pooling only): the first line is the test
        status, _ = await self.run(endpoint, body)
        if status != HTTPStatus.OK:
            raise RuntimeError(f"the woken engine for {self.name} answered its test request with {int(status)}")

    async def unload(self) -> None:
        """:meth:`shutdown` without holding the event loop: waiting for the core process to exit
        takes seconds, and the loop serves ``/health`` and the other engines' lines meanwhile.
        The output handler is cancelled on the loop first, so it does not see the core vanish
        and report the engine dead."""
        handler = getattr(self.llm, "output_handler", None)
        if isinstance(handler, asyncio.Task) and not handler.done():
            handler.cancel()
            await asyncio.wait([handler], timeout=5)
        await asyncio.to_thread(self.shutdown)


# vLLM's default shutdown_timeout (0) SIGKILLs the engine core right after its SIGTERM: it never
# gets to free the shared-memory queues it and its worker made, and Python's resource_tracker
# then warns of "leaked shared_memory objects" when batchd exits. A SIGTERM'd core exits cleanly
# in about a second; this bounds the wait.
ENGINE_EXIT_GRACE_S = 15


def shutdown_engine(llm: AsyncLLM, timeout: int) -> None:
    llm.shutdown(timeout=max(timeout, ENGINE_EXIT_GRACE_S))


def _exit_cause(code: int) -> str:
    if code < 0:
        try:
            return f"was killed by {signal.Signals(-code).name}"
        except ValueError:
            return f"was killed by signal {-code}"
    return f"exited with code {code}"


def _chat_prompt(tokenizer: Any, body: Any) -> str | None:
    """A chat line's prompt as the model sees it, or None (no template, or messages it rejects:
    then the text parts are counted)."""
    if not getattr(tokenizer, "chat_template", None) or not isinstance(body, dict):
        return None
    try:
        rendered = tokenizer.apply_chat_template(body.get("messages"), tokenize=False, add_generation_prompt=True)
    except Exception:
        return None
    return rendered if isinstance(rendered, str) else None


async def _messages_reply(handler: Any, request: Any) -> Reply:
    """What vLLM's ``/v1/messages`` route answers: the message without its null fields, or
    the error translated into Anthropic's envelope (vllm/entrypoints/anthropic/api_router.py)."""
    result = await handler.create_messages(request, None)
    if isinstance(result, ErrorResponse):
        error = AnthropicErrorResponse(error=AnthropicError(type=result.error.type, message=result.error.message))
        return int(result.error.code), _render(error.model_dump())
    if not hasattr(result, "model_dump"):
        await _close_stream(result)
        raise ValueError("The handler returned a stream for a non-streaming request.")
    return HTTPStatus.OK, _render(result.model_dump(exclude_none=True))


async def _speech_reply(handler: Any, endpoint: str, request: Any) -> Reply:
    """A run-batch audio line as vLLM run-batch answers it: ``file_url`` fetched (within
    batchd's size limit), then the route's request with the bytes as its ``file``."""
    async with audio_slot():
        try:
            audio = await fetch_audio(request.file_url)
        except AudioFetchError as exc:
            return fetch_error_reply(endpoint, exc)
        return await _speech_run(handler, endpoint, request, audio)


async def _speech_run(handler: Any, endpoint: str, request: Any, audio: bytes) -> Reply:
    fields = request.model_dump(exclude={"file_url"})
    fields["file"] = UploadFile(file=BytesIO(audio), filename="audio.bin")
    if endpoint == TRANSLATIONS:
        result = await handler.create_translation(audio, TranslationRequest.model_validate(fields), None)
    else:
        result = await handler.create_transcription(audio, TranscriptionRequest.model_validate(fields), None)
    if isinstance(result, ErrorResponse):
        return _reply_for(result)
    if not hasattr(result, "model_dump"):
        await _close_stream(result)
        raise ValueError("The handler returned a stream for a non-streaming request.")
    return HTTPStatus.OK, _render(result.model_dump())


def _render(content: Any) -> dict[str, Any]:
    """The JSON object the route's JSONResponse would put on the wire."""
    return jsonbody.loads(bytes(JSONResponse(content=content).body))


def error_reply(message: str, err_type: str, status: HTTPStatus, param: str | None = None) -> Reply:
    """An error reply in vLLM's envelope, for failures decided outside a handler."""
    return _reply_for(create_error_response(message, err_type=err_type, status_code=status, param=param))


def _reply_for(error: ErrorResponse) -> Reply:
    return int(error.error.code), _render(error.model_dump())


def _response_reply(response: Response) -> Reply:
    if isinstance(response, StreamingResponse):
        raise ValueError("The handler returned a byte stream, which a batch line cannot hold.")
    return int(response.status_code), jsonbody.loads(bytes(response.body))


async def _close_stream(result: Any) -> None:
    aclose = getattr(result, "aclose", None)
    if aclose is not None:
        await aclose()
