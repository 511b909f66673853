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
import logging
import time
from argparse import Namespace
from pathlib import Path

from starlette.datastructures import State
from vllm.engine.arg_utils import AsyncEngineArgs
from vllm.entrypoints.launchers.api_server.app_state import init_app_state
from vllm.entrypoints.launchers.cli_args import make_arg_parser, validate_parsed_serve_args
from vllm.platforms import current_platform
from vllm.usage.usage_lib import UsageContext
from vllm.utils.argparse_utils import FlexibleArgumentParser
from vllm.v1.engine.async_llm import AsyncLLM

from app.engine.config.specs import ModelSpec
from app.engine.errors import ModelConfigError
from app.engine.local.allocator import preload_engine_allocator
from app.engine.local.model_engine import ModelEngine, shutdown_engine
from app.engine.local.orphans import guard_engine_processes

logger = logging.getLogger(__name__)

# Per-engine KV cache when the spec sets no size. On CPU vLLM's default (92 %
# of the NUMA node) fails, and several engines share one process's node.
DEFAULT_CPU_KV_CACHE_GIB = 1.0
# On a GPU the engines of one process split this share of device memory.
DEFAULT_GPU_MEMORY_SHARE = 0.85

_GIB = 1 << 30


def build_serve_args(spec: ModelSpec, *, engines_in_process: int = 1) -> Namespace:
    """The ``vllm serve`` arguments for ``spec`` (defaults filled as on the CLI)."""
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
    for key, value in spec.engine_args.items():
        if not hasattr(args, key):
            raise ModelConfigError(f"Model {spec.name!r}: unknown engine option {key!r}.")
        setattr(args, key, value)
    validate_parsed_serve_args(args)
    return args


async def start_model_engine(spec: ModelSpec, *, engines_in_process: int = 1) -> ModelEngine:
    """Start the engine for ``spec`` and build its serving objects.

    Building the model files (built-ins) and starting the engine core block
    for tens of seconds, so they run in a thread: the event loop keeps serving
    ``/health`` meanwhile, and several engines start side by side.
    """
    started = time.monotonic()
    if spec.builder is not None:
        await asyncio.to_thread(spec.builder, Path(spec.path))
    args = build_serve_args(spec, engines_in_process=engines_in_process)
    preload_engine_allocator()
    guard_engine_processes()
    engine_args = AsyncEngineArgs.from_cli_args(args)
    vllm_config = engine_args.create_engine_config(usage_context=UsageContext.OPENAI_BATCH_RUNNER)

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


def engine_args_from_flags(flags: list[str]) -> dict:
    """`vllm serve`-style command-line flags (e.g. from `batchd run-batch`) as the engine_args
    they change, parsed by vLLM's own parser so names, types and errors are vLLM's."""
    parser = make_arg_parser(FlexibleArgumentParser(prog="batchd run-batch"))
    defaults = vars(parser.parse_args(["--model", "_"]))
    parsed = vars(parser.parse_args(["--model", "_", *flags]))
    return {key: value for key, value in parsed.items() if key != "model" and defaults.get(key) != value}
