"""A lean path for plain chat lines: what ``OpenAIServingChat`` answers, without its layers.

Most batch chat lines are text messages with sampling knobs. For those, the serving class's
work (message parsing for every content kind, tool and reasoning parsers, pydantic response
models rendered through a JSONResponse) costs the main process about twice the engine call
itself. :class:`FastChat` renders the prompt with vLLM's own template function on a copy of the
tokenizer in a thread, builds the ``SamplingParams`` with the request's own method and vLLM's
``get_max_tokens``, and writes the response dict the serving class would dump.

A line takes this path only when nothing in it needs the serving class (see
:func:`_eligible`) and its prompt fits the model; :meth:`FastChat.prepare` answers None for
every other line, which then goes the serving class's way, errors included. The engine
equality test (tests/engine/local/test_registry.py) holds the two paths to the same bodies.
"""

from __future__ import annotations

import asyncio
import copy
import time
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from http import HTTPStatus
from typing import Any

from app.engine.vllm_api import (
    AsyncLLM,
    ChatCompletionRequest,
    ErrorResponse,
    GenerationError,
    get_max_tokens,
    merge_kwargs,
    resolve_chat_template_content_format,
    safe_apply_chat_template,
    tokens_input,
)

# Request fields a fast line may set (beyond extra keys, which vLLM ignores): the messages and
# what ``to_sampling_params`` turns into plain sampling. Anything else goes the serving way.
_FIELDS = frozenset(
    {
        "messages",
        "model",
        "max_tokens",
        "max_completion_tokens",
        "temperature",
        "top_p",
        "top_k",
        "min_p",
        "seed",
        "stop",
        "stop_token_ids",
        "ignore_eos",
        "include_stop_str_in_output",
        "min_tokens",
        "frequency_penalty",
        "presence_penalty",
        "repetition_penalty",
        "skip_special_tokens",
        "spaces_between_special_tokens",
        "user",
        "priority",
        "request_id",
        "n",
        "stream",
        "logprobs",
        "cache_salt",  # every line batchd runs has one (app/pipeline/cache_salt.py)
    }
)
_ROLES = frozenset({"system", "user", "assistant"})
# vLLM drops this header line from system text (chat_utils._strip_claude_code_billing_header).
_STRIPPED_PREFIX = "x-anthropic-billing-header"


@dataclass(frozen=True)
class FastLine:
    """A chat line ready for the engine: its prompt tokens and sampling."""

    request: ChatCompletionRequest
    request_id: str
    prompt: str
    prompt_ids: list[int]
    sampling_params: Any


class FastChat:
    """The lean path for one chat model, or unusable (:meth:`for_handler` answers None) when the
    model's serving class is configured with anything this path does not reproduce."""

    def __init__(self, llm: AsyncLLM, handler: Any, template_kwargs: dict[str, Any]) -> None:
        self.llm = llm
        self.handler = handler
        self.model_config = handler.model_config
        self.max_model_len = int(self.model_config.max_model_len)
        self.model_name = handler.models.model_name(None)
        # A copy: the engine's own serves vLLM's renderer threads, and a fast tokenizer must not
        # be used from two threads at once.
        self._tokenizer = copy.deepcopy(llm.tokenizer)
        self._template_kwargs = template_kwargs
        self._render_thread = ThreadPoolExecutor(max_workers=1, thread_name_prefix="batchd-fast-chat")

    @classmethod
    def for_handler(cls, llm: AsyncLLM, handler: Any) -> FastChat | None:
        config = llm.vllm_config
        model_config = handler.model_config
        plain = (
            llm.tokenizer is not None
            and type(llm.tokenizer).__name__ != "MistralTokenizer"
            and handler.parser_cls is None
            and handler.online_renderer.parser is None
            and handler.request_logger is None
            and not handler.enable_prompt_tokens_details
            and not handler.enable_per_request_metrics
            and not handler.enable_log_outputs
            and not getattr(handler.online_renderer, "use_harmony", False)
            and not model_config.enable_prompt_embeds
            and model_config.multimodal_config is None
            and config.speculative_config is None
            and config.kv_transfer_config is None
        )
        if not plain:
            return None
        try:
            template_kwargs = _template_kwargs(handler.online_renderer, handler.models.model_name(None))
            content_format = resolve_chat_template_content_format(
                chat_template=template_kwargs.get("chat_template"),
                tools=None,
                given_format=handler.online_renderer.chat_template_content_format,
                tokenizer=llm.tokenizer,
                model_config=model_config,
            )
            # Under "openai" content vLLM hands the template lists of parts; only "string" is flat.
            return cls(llm, handler, template_kwargs) if content_format == "string" else None
        except Exception:
            return None  # a template or tokenizer this path cannot read: the serving class serves it

    async def prepare(self, request: ChatCompletionRequest) -> FastLine | None:
        """The line ready for the engine, or None: it needs the serving class (so does a line
        naming a LoRA adapter: the serving class resolves its ``LoRARequest``)."""
        conversation = _conversation(request) if request.model == self.model_name else None
        if conversation is None:
            return None
        loop = asyncio.get_running_loop()
        rendered = await loop.run_in_executor(self._render_thread, self._render, conversation)
        if rendered is None:
            return None
        prompt, prompt_ids = rendered
        requested = request.max_completion_tokens if request.max_completion_tokens is not None else request.max_tokens
        # Too long a prompt or output: the serving class's error, from the serving class.
        if len(prompt_ids) >= self.max_model_len or (requested is not None and requested > self.max_model_len):
            return None
        max_tokens = get_max_tokens(
            self.max_model_len,
            requested,
            len(prompt_ids),
            self.handler.default_sampling_params,
            self.handler.override_max_tokens,
        )
        sampling_params = request.to_sampling_params(max_tokens, self.handler.default_sampling_params)
        return FastLine(request, f"chatcmpl-{request.request_id}", prompt, prompt_ids, sampling_params)

    def _render(self, conversation: list[dict[str, str]]) -> tuple[str, list[int]] | None:
        tokenizer = self._tokenizer
        try:
            prompt = safe_apply_chat_template(
                self.model_config,
                tokenizer,
                conversation,
                **self._template_kwargs,
            )
        except Exception:
            return None  # the template rejects it: the serving class reports that
        if not isinstance(prompt, str) or len(prompt) > self.max_model_len * tokenizer.max_chars_per_token:
            return None
        return prompt, tokenizer.encode(prompt, add_special_tokens=False)

    async def run(self, line: FastLine) -> dict[str, Any] | ErrorResponse:
        """Generate ``line`` and answer the body (or error) the serving class would."""
        request = line.request
        self.handler._preflight(1)
        generator = self.llm.generate(
            tokens_input(line.prompt_ids, prompt=line.prompt, cache_salt=request.cache_salt),
            line.sampling_params,
            line.request_id,
            priority=request.priority,
            reasoning_ended=request.resolve_reasoning_ended(None, line.prompt_ids),
        )
        created = int(time.time())
        final = None
        async for output in generator:
            final = output
        if final is None:
            return self.handler.create_error_response(
                "No output received from the engine.",
                err_type="InternalServerError",
                status_code=HTTPStatus.INTERNAL_SERVER_ERROR,
            )
        (output,) = final.outputs
        if output.finish_reason == "error":
            raise GenerationError("Internal server error")
        prompt_tokens = len(final.prompt_token_ids or ())
        completion_tokens = len(output.token_ids)
        return {
            "id": line.request_id,
            "object": "chat.completion",
            "created": created,
            "model": self.model_name,
            "choices": [
                {
                    "index": output.index,
                    "message": {
                        "role": self.handler.response_role,
                        "content": output.text,
                        "refusal": None,
                        "annotations": None,
                        "audio": None,
                        "function_call": None,
                        "reasoning": None,
                    },
                    "logprobs": None,
                    "finish_reason": output.finish_reason or "stop",
                    "stop_reason": output.stop_reason,
                    "token_ids": None,
                    "routed_experts": None,
                }
            ],
            "service_tier": None,
            "system_fingerprint": self.handler.system_fingerprint,
            "usage": {
                "prompt_tokens": prompt_tokens,
                "total_tokens": prompt_tokens + completion_tokens,
                "completion_tokens": completion_tokens,
                "prompt_tokens_details": None,
                "completion_tokens_details": None,
            },
            "prompt_logprobs": None,
            "prompt_token_ids": None,
            "prompt_text": None,
            "kv_transfer_params": final.kv_transfer_params,
            "ec_transfer_params": final.ec_transfer_params,
            "metrics": None,
        }

    def shutdown(self) -> None:
        self._render_thread.shutdown(wait=False, cancel_futures=True)


def _template_kwargs(renderer: Any, model_name: str) -> dict[str, Any]:
    """What the serving class passes the chat template for a line that sets none of its
    template fields (OnlineRenderer.preprocess_chat, tools and all)."""
    reference = ChatCompletionRequest.model_validate({"model": model_name, "messages": []})
    defaults = merge_kwargs(renderer.default_chat_template_kwargs, {"tools": None, "tokenize": False})
    params = reference.build_chat_params(renderer.chat_template, renderer.chat_template_content_format)
    return params.with_defaults(defaults).get_apply_chat_template_kwargs()


def _conversation(request: ChatCompletionRequest) -> list[dict[str, str]] | None:
    """The messages as vLLM's parser would hand them to a "string"-format template, or None
    when the line needs the serving class."""
    if not request.model_fields_set <= _FIELDS | set(request.model_extra or ()):
        return None
    if request.n not in (None, 1) or request.stream or request.logprobs:
        return None
    conversation = []
    for message in request.messages:
        if not isinstance(message, dict) or message.keys() != {"role", "content"} or message["role"] not in _ROLES:
            return None
        content = message["content"]
        if isinstance(content, str):
            text = content
        elif isinstance(content, list) and all(_is_text_part(part) for part in content):
            text = "\n".join(part["text"] for part in content)
        else:
            return None
        if _STRIPPED_PREFIX in text:
            return None
        conversation.append({"role": message["role"], "content": text})
    return conversation


def _is_text_part(part: Any) -> bool:
    return (
        isinstance(part, dict)
        and part.keys() == {"type", "text"}
        and part["type"] == "text"
        and isinstance(part["text"], str)
    )
