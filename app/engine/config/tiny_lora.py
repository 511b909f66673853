"""Build ``batchd-tiny-lora``: a seeded LoRA adapter for ``batchd-tiny-chat``.

It exists so that batchd's adapter support (``--lora``, ``adapters:``) can be exercised on a
machine with no network: a PEFT-format folder (``adapter_config.json`` and
``adapter_model.safetensors``) of rank-8 ``A``/``B`` matrices on the tiny model's attention
projections, large enough that greedy output differs from the base model's. Like the base, it
is deterministic (fixed seed) and built in well under a second.
"""

from __future__ import annotations

import json
from pathlib import Path

from app.engine.config.atomic_folder import build_folder
from app.engine.config.tiny_chat import TINY_CHAT_NAME, TinyChatShape

TINY_LORA_NAME = "batchd-tiny-lora"

_SEED = 20261128
RANK = 8
_TARGETS = ("q_proj", "k_proj", "v_proj", "o_proj")


def build_tiny_lora_adapter(dest: Path) -> Path:
    """Build the adapter into ``dest`` unless it is already there; return ``dest``."""
    return build_folder(dest, _write)


def _projection_shapes() -> dict[str, tuple[int, int]]:
    """``(in_features, out_features)`` of each attention projection of the base model."""
    hidden = TinyChatShape.HIDDEN
    q_out = TinyChatShape.HEADS * TinyChatShape.HEAD_DIM
    kv_out = TinyChatShape.KV_HEADS * TinyChatShape.HEAD_DIM
    return {
        "q_proj": (hidden, q_out),
        "k_proj": (hidden, kv_out),
        "v_proj": (hidden, kv_out),
        "o_proj": (q_out, hidden),
    }


def _write(folder: Path) -> None:
    import torch
    from safetensors.torch import save_file

    tensors: dict[str, torch.Tensor] = {}
    generator = torch.Generator().manual_seed(_SEED)
    for layer in range(TinyChatShape.LAYERS):
        for module, (fan_in, fan_out) in _projection_shapes().items():
            prefix = f"base_model.model.model.layers.{layer}.self_attn.{module}"
            # Unit-scale updates (PEFT would start B at zero, a no-op): the tiny model's greedy
            # tokens then differ from the base's within the first few.
            tensors[f"{prefix}.lora_A.weight"] = torch.randn(RANK, fan_in, generator=generator) / fan_in**0.5
            tensors[f"{prefix}.lora_B.weight"] = torch.randn(fan_out, RANK, generator=generator) / RANK**0.5
    save_file(tensors, str(folder / "adapter_model.safetensors"))
    config = {
        "base_model_name_or_path": TINY_CHAT_NAME,
        "peft_type": "LORA",
        "task_type": "CAUSAL_LM",
        "r": RANK,
        "lora_alpha": RANK,
        "lora_dropout": 0.0,
        "bias": "none",
        "fan_in_fan_out": False,
        "target_modules": list(_TARGETS),
        "modules_to_save": None,
    }
    (folder / "adapter_config.json").write_text(json.dumps(config, indent=2) + "\n", encoding="utf-8")
