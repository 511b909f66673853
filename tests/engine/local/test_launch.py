"""A ModelSpec becomes the same arguments `vllm serve` would parse (no engine started)."""

from __future__ import annotations

import pytest

from app.engine.config.specs import ModelSpec
from app.engine.errors import ModelConfigError


def test_spec_to_serve_args():
    from app.engine.local.launch import build_serve_args

    spec = ModelSpec(
        name="chat",
        path="/models/chat",
        runner="generate",
        max_model_len=1024,
        kv_cache_gib=0.5,
        engine_args={"max_num_seqs": 8, "enable_prompt_tokens_details": True},
    )
    args = build_serve_args(spec)

    assert args.model == "/models/chat"
    assert args.served_model_name == ["chat"]
    assert (args.runner, args.max_model_len) == ("generate", 1024)
    assert args.kv_cache_memory_bytes == 512 * 2**20
    assert args.max_num_seqs == 8
    assert args.enable_prompt_tokens_details is True
    # bf16 is unreliable on vLLM's CPU backend, so float32 is the CPU default.
    assert args.dtype == ("float32" if _on_cpu() else "auto")


def test_default_memory_and_explicit_share():
    from app.engine.local.launch import DEFAULT_CPU_KV_CACHE_GIB, build_serve_args

    if _on_cpu():
        assert build_serve_args(ModelSpec(name="m", path="/m")).kv_cache_memory_bytes == int(
            DEFAULT_CPU_KV_CACHE_GIB * 2**30
        )
    shared = build_serve_args(ModelSpec(name="m", path="/m", gpu_memory_utilization=0.3))
    assert shared.gpu_memory_utilization == 0.3
    assert shared.kv_cache_memory_bytes is None


def test_unknown_engine_option_is_rejected():
    from app.engine.local.launch import build_serve_args

    with pytest.raises(ModelConfigError):
        build_serve_args(ModelSpec(name="m", path="/m", engine_args={"max_num_seq": 8}))


def _on_cpu() -> bool:
    from vllm.platforms import current_platform

    return current_platform.is_cpu()
