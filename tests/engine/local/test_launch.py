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


def test_lora_slots_and_rank_are_sized_from_the_adapters(tmp_path):
    """Every adapter has a slot (one more, kept empty, on CPU: base lines index the last slot
    there) and the rank is the smallest vLLM accepts that fits the largest adapter's."""
    import json

    from app.engine.config.specs import AdapterSpec
    from app.engine.local.launch import build_serve_args

    adapters = []
    for name, rank in (("small", 4), ("large", 12)):
        (tmp_path / name).mkdir()
        (tmp_path / name / "adapter_config.json").write_text(json.dumps({"r": rank}))
        adapters.append(AdapterSpec(name=name, path=str(tmp_path / name)))
    args = build_serve_args(ModelSpec(name="chat", path="/models/chat", adapters=tuple(adapters)))

    assert args.enable_lora is True
    assert args.max_loras == 2 + (1 if _on_cpu() else 0)
    assert args.max_lora_rank == 16
    assert [(m.name, m.path, m.base_model_name) for m in args.lora_modules] == [
        ("small", str(tmp_path / "small"), "chat"),
        ("large", str(tmp_path / "large"), "chat"),
    ]
    overridden = build_serve_args(
        ModelSpec(name="chat", path="/models/chat", adapters=tuple(adapters), engine_args={"max_loras": 4})
    )
    assert overridden.max_loras == 4


def _on_cpu() -> bool:
    from vllm.platforms import current_platform

    return current_platform.is_cpu()


def test_the_engine_config_is_built_off_the_event_loop(monkeypatch):
    """vLLM's config building (~2 s of CPU) runs in a thread: on the loop it held a live server's
    requests at every engine (re)start."""
    import asyncio
    import threading

    from app.engine.local import launch

    built_on: list[int] = []

    class Stop(Exception):
        pass

    def from_cli_args(args):
        built_on.append(threading.get_ident())
        assert args.model == "/m" and args.served_model_name == ["m"]
        raise Stop

    monkeypatch.setattr(launch.AsyncEngineArgs, "from_cli_args", from_cli_args)

    async def start() -> int:
        with pytest.raises(Stop):
            await launch.start_model_engine(ModelSpec(name="m", path="/m"))
        return threading.get_ident()

    loop_thread = asyncio.run(start())
    assert len(built_on) == 1 and built_on[0] != loop_thread
