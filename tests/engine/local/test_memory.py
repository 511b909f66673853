"""An engine's memory need under --engine-memory-budget (app.engine.local.memory), by the model's
options and the device: no engine starts."""

from __future__ import annotations

from app.engine.config.specs import ModelSpec
from app.engine.local.launch import DEFAULT_GPU_MEMORY_SHARE
from app.engine.local.memory import GIB, DeviceMemory, engine_memory_need, memory_budget

CPU = DeviceMemory(on_cpu=True, total=64 * GIB, free=40 * GIB)
GPU = DeviceMemory(on_cpu=False, total=80 * GIB, free=79 * GIB)


def test_an_engines_memory_need_by_its_options(tmp_path):
    folder = tmp_path / "model"
    (folder / "original").mkdir(parents=True)
    (folder / "model.safetensors").write_bytes(b"w" * 3000)
    (folder / "config.json").write_text("{}")  # not weights
    (folder / "original" / "consolidated.pth").write_bytes(b"w" * 3000)  # a second copy, not loaded
    model = ModelSpec(name="m", path=str(folder))
    rows = [
        # Given in the config file: taken as it is.
        (ModelSpec(name="m", path="/none", memory_gib=6), CPU, 1, 6 * GIB),
        # A KV cache size (on CPU the 1 GiB default): it plus the weights on disk.
        (model, CPU, 1, GIB + 3000),
        (ModelSpec(name="m", path=str(folder), kv_cache_gib=2), GPU, 1, 2 * GIB + 3000),
        # A share of the device: vLLM holds the whole engine to it.
        (ModelSpec(name="m", path=str(folder), gpu_memory_utilization=0.25), GPU, 1, 20 * GIB),
        # On a GPU by default: the engines of the process split DEFAULT_GPU_MEMORY_SHARE.
        (model, GPU, 2, int(DEFAULT_GPU_MEMORY_SHARE / 2 * 80 * GIB)),
        # Weights not found locally (a hub id not downloaded): the KV cache only.
        (ModelSpec(name="m", path="no-such-org/no-such-model"), CPU, 1, GIB),
    ]
    for spec, device, engines, need in rows:
        assert engine_memory_need(spec, engines, device) == need, (spec, device)


def test_the_budget_is_the_settings_or_with_auto_the_devices_free_memory():
    assert memory_budget(8 * GIB, GPU) == 8 * GIB
    assert memory_budget("auto", GPU) == 79 * GIB
    assert memory_budget("auto", CPU) == 40 * GIB
