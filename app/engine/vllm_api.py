"""Every vLLM name batchd uses, imported here and nowhere else under app/.

batchd is tested against one vLLM release (the `cpu` and `gpu` extras pin it). Much of what it
uses is vLLM's internal layout (its serving classes, protocols, launcher helpers), which moves
between releases: an upgrade starts here, where one failing import names what moved.
tests/engine/test_vllm_api.py holds every other module of app/ to importing vLLM only from here.

Importing this module imports vLLM (seconds of CPU): import it only from modules that run
engines, or lazily (app.engine.boot and app.runbatch import app.engine.local inside functions).
"""

from pathlib import Path

import vllm
from vllm import envs as vllm_envs
from vllm.config import VllmConfig
from vllm.engine.arg_utils import AsyncEngineArgs
from vllm.entrypoints.anthropic.protocol import AnthropicError, AnthropicErrorResponse, AnthropicMessagesRequest
from vllm.entrypoints.launchers.api_server.app_state import init_app_state
from vllm.entrypoints.launchers.cli_args import make_arg_parser, validate_parsed_serve_args
from vllm.entrypoints.launchers.run_batch import BatchTranscriptionRequest, BatchTranslationRequest
from vllm.entrypoints.openai.chat_completion.protocol import ChatCompletionRequest
from vllm.entrypoints.openai.completion.protocol import CompletionRequest
from vllm.entrypoints.openai.models.protocol import LoRAModulePath
from vllm.entrypoints.openai.responses.protocol import ResponsesRequest
from vllm.entrypoints.pooling.embed.protocol import EmbeddingRequest
from vllm.entrypoints.pooling.scoring.protocol import RerankRequest, ScoreRequest
from vllm.entrypoints.serve import create_error_response
from vllm.entrypoints.serve.engine.protocol import ErrorResponse
from vllm.entrypoints.serve.exception_handling.handlers.validation import (
    clean_loc_for_param,
    validation_exception_handler,
)
from vllm.entrypoints.serve.utils.api_utils import get_max_tokens
from vllm.entrypoints.speech_to_text.transcription.protocol import TranscriptionRequest
from vllm.entrypoints.speech_to_text.translation.protocol import TranslationRequest
from vllm.exceptions import GenerationError, VLLMValidationError
from vllm.inputs import tokens_input
from vllm.multimodal.media import MEDIA_CONNECTOR_REGISTRY, MediaConnector
from vllm.platforms import current_platform
from vllm.renderers.hf import resolve_chat_template_content_format, safe_apply_chat_template
from vllm.renderers.params import merge_kwargs
from vllm.usage.usage_lib import UsageContext
from vllm.utils.argparse_utils import FlexibleArgumentParser
from vllm.utils.import_utils import import_pynvml
from vllm.v1.engine.async_llm import AsyncLLM
from vllm.v1.engine.core import EngineCoreProc

# vllm.v1.engine.exceptions (renamed: batchd has its own EngineDeadError in app.engine.errors)
from vllm.v1.engine.exceptions import EngineDeadError as VllmEngineDeadError
from vllm.v1.engine.utils import CoreEngineProcManager

# The installed vLLM package's directory (where its wheel bundles native libraries).
VLLM_PACKAGE_DIR = Path(vllm.__file__).parent

__all__ = [
    "MEDIA_CONNECTOR_REGISTRY",
    "VLLM_PACKAGE_DIR",
    "AnthropicError",
    "AnthropicErrorResponse",
    "AnthropicMessagesRequest",
    "AsyncEngineArgs",
    "AsyncLLM",
    "CoreEngineProcManager",
    "BatchTranscriptionRequest",
    "BatchTranslationRequest",
    "ChatCompletionRequest",
    "CompletionRequest",
    "EmbeddingRequest",
    "EngineCoreProc",
    "ErrorResponse",
    "FlexibleArgumentParser",
    "MediaConnector",
    "GenerationError",
    "LoRAModulePath",
    "RerankRequest",
    "ResponsesRequest",
    "ScoreRequest",
    "TranscriptionRequest",
    "TranslationRequest",
    "UsageContext",
    "VLLMValidationError",
    "VllmConfig",
    "VllmEngineDeadError",
    "clean_loc_for_param",
    "create_error_response",
    "current_platform",
    "get_max_tokens",
    "import_pynvml",
    "init_app_state",
    "make_arg_parser",
    "merge_kwargs",
    "resolve_chat_template_content_format",
    "safe_apply_chat_template",
    "tokens_input",
    "validate_parsed_serve_args",
    "validation_exception_handler",
    "vllm_envs",
]
