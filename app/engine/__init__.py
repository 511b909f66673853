"""batchd's engine layer: the only package that imports vLLM.

Importing ``app.engine`` is cheap: the light names (specs, results, errors,
endpoints) load eagerly, while :class:`EngineRegistry` — which pulls in vLLM
and torch, several seconds of imports — loads on first access. Code that only
validates config or handles results never pays for vLLM.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from app.core.endpoints import ALL_ENDPOINTS, normalize_endpoint
from app.engine.catalog import MINILM_NAME, builtin_model_specs, resolve_model_specs
from app.engine.errors import EngineDeadError, EngineError, EngineNotReadyError, RequestAborted
from app.engine.results import LineProblem, LineResult, Usage
from app.engine.specs import ModelConfigError, ModelSpec, load_model_config, parse_model_arg
from app.engine.tiny_chat import TINY_CHAT_NAME, build_tiny_chat_model

if TYPE_CHECKING:
    from app.engine.registry import EngineRegistry

__all__ = [
    "ALL_ENDPOINTS",
    "MINILM_NAME",
    "TINY_CHAT_NAME",
    "EngineDeadError",
    "EngineError",
    "EngineNotReadyError",
    "EngineRegistry",
    "LineProblem",
    "LineResult",
    "ModelConfigError",
    "ModelSpec",
    "RequestAborted",
    "Usage",
    "build_tiny_chat_model",
    "builtin_model_specs",
    "load_model_config",
    "normalize_endpoint",
    "parse_model_arg",
    "resolve_model_specs",
]


def __getattr__(name: str) -> Any:
    if name == "EngineRegistry":
        from app.engine.registry import EngineRegistry

        return EngineRegistry
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
