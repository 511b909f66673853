"""Start one vLLM engine for a :class:`ModelSpec` the way ``vllm serve`` does.

The spec becomes the same ``argparse.Namespace`` the ``vllm serve`` command
line would produce, so every default (and every option a user passes through
``engine_args``) means exactly what it means to vLLM. From it we build the
``AsyncLLM`` and then vLLM's own serving objects with ``init_app_state`` — the
function ``vllm serve`` and ``vllm run-batch`` call — so response bodies are
vLLM's.
"""

from __future__ import annotations

import asyncio
import json
import logging
import threading
import time
from argparse import Namespace
from pathlib import Path

from starlette.datastructures import State

from app.engine.config.specs import ModelSpec
from app.engine.errors import ModelConfigError
from app.engine.local.allocator import preload_engine_allocator
from app.engine.local.media import guard_media_fetches
from app.engine.local.model_engine import ModelEngine, shutdown_engine
from app.engine.local.orphans import guard_engine_processes
from app.engine.vllm_api import (
    AsyncEngineArgs,
    AsyncLLM,
    FlexibleArgumentParser,
    LoRAModulePath,
    UsageContext,
    VllmConfig,
    current_platform,
    init_app_state,
    make_arg_parser,
    validate_parsed_serve_args,
)

logger = logging.getLogger(__name__)

# Per-engine KV cache when the spec sets no size. On CPU vLLM's default (92 %
# of the NUMA node) fails, and several engines share one process's node.
DEFAULT_CPU_KV_CACHE_GIB = 1.0
# On a GPU the engines of one process split this share of device memory.
DEFAULT_GPU_MEMORY_SHARE = 0.85

_GIB = 1 << 30


def build_serve_args(spec: ModelSpec, *, engines_in_process: int = 1, sleep_mode: bool = False) -> Namespace:
    """The ``vllm serve`` arguments for ``spec`` (defaults filled as on the CLI); with
    ``sleep_mode`` (engines on demand), vLLM's sleep mode where it works (CUDA), so a swapped-out
    engine can sleep instead of shutting down (engine_args may turn it off)."""
    parser = make_arg_parser(FlexibleArgumentParser(prog="batchd"))
    args = parser.parse_args(["--model", spec.path])
    args.served_model_name = [spec.name]
    args.runner = spec.runner
    # bf16 checkpoints crash vLLM's CPU worker without a message; float32 works.
    args.dtype = spec.dtype or ("float32" if current_platform.is_cpu() else "auto")
    if spec.max_model_len is not None:
        args.max_model_len = spec.max_model_len
    if spec.kv_cache_gib is not None:
        args.kv_cache_memory_bytes = int(spec.kv_cache_gib * _GIB)
    elif spec.gpu_memory_utilization is not None:
        args.gpu_memory_utilization = spec.gpu_memory_utilization
    elif current_platform.is_cpu():
        args.kv_cache_memory_bytes = int(DEFAULT_CPU_KV_CACHE_GIB * _GIB)
    else:
        args.gpu_memory_utilization = DEFAULT_GPU_MEMORY_SHARE / max(1, engines_in_process)
    # Batch work reports its own progress; vLLM's per-step stats (periodic throughput logs,
    # Prometheus counters) cost the busy front-end process ~10% of its time. A model's
    # engine_args can turn them back on with disable_log_stats: false.
    args.disable_log_stats = True
    # Lines carry a priority (app.scheduling.priority): at-risk batches' lines ahead of the
    # others, which keep the order batchd's fair gate admitted them in. Requests without one
    # (0) run in arrival order, as under "fcfs"; engine_args may still choose "fcfs".
    args.scheduling_policy = "priority"
    if spec.adapters:
        _enable_lora(args, spec)
    if sleep_mode and current_platform.is_cuda():
        args.enable_sleep_mode = True
    for key, value in spec.engine_args.items():
        if not hasattr(args, key):
            raise ModelConfigError(f"Model {spec.name!r}: unknown engine option {key!r}.")
        setattr(args, key, value)
    validate_parsed_serve_args(args)
    return args


# The ranks vLLM's LoRA config accepts for max_lora_rank (vllm.config.lora.MaxLoRARanks).
_LORA_RANKS = (1, 8, 16, 32, 64, 128, 256, 320, 512)


def _enable_lora(args: Namespace, spec: ModelSpec) -> None:
    """vLLM's LoRA support for the spec's adapters, as ``vllm serve --enable-lora
    --lora-modules ...`` would set it: every adapter loaded at start (so all fit at once) and
    the rank sized to the largest. The serving classes then run a line whose ``model`` names
    an adapter with its ``LoRARequest`` and answer under the adapter's name."""
    ranks = [_adapter_rank(spec.name, Path(adapter.path)) for adapter in spec.adapters]
    largest = max(ranks)
    args.enable_lora = True
    # One slot more than the adapters, left empty: vLLM's CPU LoRA ops (torch_ops/lora_ops.py)
    # index the stacked weights with a line's slot, and a line with no adapter has slot -1, which
    # selects the last slot; an empty last slot adds nothing (else base lines batched with adapter
    # lines ran with the last adapter).
    args.max_loras = len(spec.adapters) + (1 if current_platform.is_cpu() else 0)
    args.max_lora_rank = next((rank for rank in _LORA_RANKS if rank >= largest), largest)
    args.lora_modules = [
        LoRAModulePath(name=adapter.name, path=adapter.path, base_model_name=spec.name) for adapter in spec.adapters
    ]


def _adapter_rank(model: str, folder: Path) -> int:
    try:
        config = json.loads((folder / "adapter_config.json").read_text(encoding="utf-8"))
        rank = config.get("r")
    except (OSError, ValueError, AttributeError) as exc:
        raise ModelConfigError(f"Model {model!r}: cannot read the adapter config in {folder}: {exc}") from exc
    if not isinstance(rank, int) or rank < 1:
        raise ModelConfigError(f"Model {model!r}: the adapter in {folder} has no rank r.")
    return rank


# vLLM's config building reads global state (the platform, environment); engines starting side
# by side build theirs one at a time, as they did on the loop.
_config_lock = threading.Lock()


def _engine_config(
    spec: ModelSpec, engines_in_process: int, sleep_mode: bool = False
) -> tuple[Namespace, AsyncEngineArgs, VllmConfig]:
    """The serve arguments and vLLM's engine config for `spec`: about 2 s of CPU (argument
    parsing, ModelConfig's checks of the model files), so started in a thread: on the loop it
    held every request of a live server for as long at each engine (re)start."""
    with _config_lock:
        args = build_serve_args(spec, engines_in_process=engines_in_process, sleep_mode=sleep_mode)
        engine_args = AsyncEngineArgs.from_cli_args(args)
        return args, engine_args, engine_args.create_engine_config(usage_context=UsageContext.OPENAI_BATCH_RUNNER)


async def start_model_engine(spec: ModelSpec, *, engines_in_process: int = 1, sleep_mode: bool = False) -> ModelEngine:
    """Start the engine for ``spec`` and build its serving objects.

    Building the model files (built-ins) and starting the engine core block
    for tens of seconds, so they run in a thread: the event loop keeps serving
    ``/health`` meanwhile, and several engines start side by side.
    """
    started = time.monotonic()
    if spec.builder is not None:
        await asyncio.to_thread(spec.builder, Path(spec.path))
    for adapter in spec.adapters:
        if adapter.builder is not None:
            await asyncio.to_thread(adapter.builder, Path(adapter.path))
    preload_engine_allocator()
    guard_engine_processes()
    guard_media_fetches()
    args, engine_args, vllm_config = await asyncio.to_thread(_engine_config, spec, engines_in_process, sleep_mode)

    # Same construction as vLLM's build_async_engine_client_from_engine_args.
    # AsyncLLM starts its output handler lazily when built outside the loop.
    llm = await asyncio.to_thread(
        AsyncLLM.from_vllm_config,
        vllm_config=vllm_config,
        usage_context=UsageContext.OPENAI_BATCH_RUNNER,
        enable_log_requests=engine_args.enable_log_requests,
        aggregate_engine_logging=engine_args.aggregate_engine_logging,
        disable_log_stats=engine_args.disable_log_stats,
    )
    try:
        await llm.reset_mm_cache()
        supported_tasks = await llm.get_supported_tasks()
        state = State()
        await init_app_state(llm, state, args, supported_tasks)
    except BaseException:
        shutdown_engine(llm, vllm_config.shutdown_timeout)
        raise
    engine = ModelEngine(spec=spec, llm=llm, state=state, supported_tasks=tuple(supported_tasks))
    logger.info(
        "Engine for %s ready in %.1f s (tasks: %s; endpoints: %s)",
        spec.name,
        time.monotonic() - started,
        ", ".join(supported_tasks),
        ", ".join(sorted(engine.endpoints)),
    )
    return engine
