"""What an in-process engine's memory need is, and the budget engines on demand share
(``--engine-memory-budget``, #58).

A model's need is the config file's ``memory_gib`` when it gives one. Otherwise it is estimated
from the model's options, as vLLM sizes the engine:

- with a share of the device (``gpu_memory_utilization``, or on a GPU the default split
  ``launch.DEFAULT_GPU_MEMORY_SHARE / engines``): that share of the device's total memory, which
  vLLM holds the engine's weights, activations and KV cache to;
- with a KV cache size (``kv_cache_gib``, or on CPU the default ``launch.DEFAULT_CPU_KV_CACHE_GIB``):
  that size plus the weights' size on disk (the model folder's weight files, or the Hugging Face
  cache's for a hub id; a hub id not downloaded yet counts its KV cache only, so give it a
  ``memory_gib``).

The estimate leaves out the engine process's own overhead (CUDA context, Python, the compiled
graphs), hence ``memory_gib`` for a budget that must hold exactly. The budget ``auto`` is the
device's free memory when the engines start: NVML's free memory of the first visible GPU (read
without initialising CUDA in this process), on CPU the host's available memory.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass
from pathlib import Path

import psutil

from app.engine.config.specs import ModelSpec
from app.engine.errors import ModelConfigError
from app.engine.local.launch import DEFAULT_CPU_KV_CACHE_GIB, DEFAULT_GPU_MEMORY_SHARE
from app.engine.local.platform import engine_runs_on_cpu

logger = logging.getLogger(__name__)

GIB = 1 << 30
WEIGHT_SUFFIXES = (".safetensors", ".bin", ".pt", ".pth", ".gguf")


@dataclass(frozen=True)
class DeviceMemory:
    """The memory engines run in: a GPU's (``on_cpu`` False) or the host's, in bytes."""

    on_cpu: bool
    total: int
    free: int


def device_memory() -> DeviceMemory:
    """The device the engines of this process run on, read now."""
    if engine_runs_on_cpu():
        host = psutil.virtual_memory()
        return DeviceMemory(True, int(host.total), int(host.available))
    from app.engine.vllm_api import current_platform, import_pynvml

    pynvml = import_pynvml()
    pynvml.nvmlInit()
    try:
        handle = pynvml.nvmlDeviceGetHandleByIndex(current_platform.device_id_to_physical_device_id(0))
        info = pynvml.nvmlDeviceGetMemoryInfo(handle)
        return DeviceMemory(False, int(info.total), int(info.free))
    finally:
        pynvml.nvmlShutdown()


def engine_memory_need(spec: ModelSpec, engines_in_process: int, device: DeviceMemory) -> int:
    """Bytes ``spec``'s engine takes when loaded (module docstring: how it is estimated)."""
    if spec.memory_gib is not None:
        return int(spec.memory_gib * GIB)
    share = spec.gpu_memory_utilization
    if share is None and spec.kv_cache_gib is None and not device.on_cpu:
        share = DEFAULT_GPU_MEMORY_SHARE / max(1, engines_in_process)
    if share is not None:
        return int(share * device.total)
    kv_cache_gib = spec.kv_cache_gib if spec.kv_cache_gib is not None else DEFAULT_CPU_KV_CACHE_GIB
    return int(kv_cache_gib * GIB) + weights_on_disk(spec)


def weights_on_disk(spec: ModelSpec) -> int:
    """The size of the model's weight files: its folder's, or the Hugging Face cache's copy of a
    hub id (0, with a warning, when there is none yet)."""
    folder = Path(spec.path).expanduser()
    if not folder.is_dir():
        folder = _cached_snapshot(spec.path) or folder
    if not folder.is_dir():
        logger.warning(
            "Model %s: no local weights to size its engine by (%s); set memory_gib in the model config "
            "to count them against the engine memory budget",
            spec.name,
            spec.path,
        )
        return 0
    # The top level only, where vLLM loads them from (some repositories keep a second copy below).
    return sum(f.stat().st_size for f in folder.iterdir() if f.suffix in WEIGHT_SUFFIXES and f.is_file())


def _cached_snapshot(hub_id: str) -> Path | None:
    try:
        from huggingface_hub import snapshot_download

        return Path(snapshot_download(hub_id, local_files_only=True))
    except Exception:  # noqa: BLE001 - not a hub id, or not downloaded: no weights to count
        return None


def memory_budget(setting: int | str, device: DeviceMemory) -> int:
    """The budget in bytes: the setting's, or with ``auto`` the device's free memory now."""
    if setting == "auto":
        return device.free
    if isinstance(setting, str):
        raise ModelConfigError(f"Engine memory budget {setting!r}: expected a size in bytes or auto.")
    return setting


def gib(size: int) -> str:
    return f"{size / GIB:.1f} GiB"


__all__ = ["GIB", "DeviceMemory", "device_memory", "engine_memory_need", "gib", "memory_budget", "weights_on_disk"]
