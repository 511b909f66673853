"""LoRA adapters as served models: ``--lora NAME=PATH[@BASE]`` and ``adapters:`` in the config.

An adapter is served under its own name on its base model's engine (vLLM's LoRA support).
Its base is ``@BASE`` when given, else the ``base_model_name_or_path`` of its
``adapter_config.json``, matched against the served models by served name, by path, or by
the path's folder name. ``batchd-tiny-lora`` names the built-in adapter (for
``batchd-tiny-chat``, built under ``<data_dir>/models`` on first use).
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import replace
from pathlib import Path
from typing import Any

from app.engine.config.specs import AdapterSpec, ModelSpec
from app.engine.config.tiny_chat import TINY_CHAT_NAME
from app.engine.config.tiny_lora import TINY_LORA_NAME, build_tiny_lora_adapter
from app.engine.config.upstream import UpstreamSpec
from app.engine.errors import ModelConfigError

ADAPTER_CONFIG = "adapter_config.json"


def parse_lora_arg(value: str) -> tuple[str, str, str | None]:
    """Split a ``--lora`` value into ``(served_name, path, base or None)``."""
    name, sep, rest = value.strip().partition("=")
    if not sep or not name.strip() or "/" in name or not rest.strip():
        raise ModelConfigError(f"--lora {value!r}: expected NAME=PATH or NAME=PATH@BASE.")
    path, at, base = rest.rpartition("@")
    if not at:
        path, base = rest, ""
    if at and not base.strip():
        raise ModelConfigError(f"--lora {value!r}: a base model name must follow '@'.")
    return name.strip(), path.strip(), base.strip() or None


def adapter_spec(name: str, path: str, data_dir: Path) -> AdapterSpec:
    """The adapter ``name`` served from ``path`` (or the built-in adapter's name)."""
    if path == TINY_LORA_NAME:
        return AdapterSpec(
            name=name, path=str(Path(data_dir) / "models" / TINY_LORA_NAME), builder=build_tiny_lora_adapter
        )
    return AdapterSpec(name=name, path=path)


def declared_base(adapter: AdapterSpec) -> str:
    """The base model the adapter's ``adapter_config.json`` names."""
    if adapter.builder is build_tiny_lora_adapter:
        return TINY_CHAT_NAME
    config_file = Path(adapter.path).expanduser() / ADAPTER_CONFIG
    try:
        config: Any = json.loads(config_file.read_text(encoding="utf-8"))
    except (OSError, ValueError) as exc:
        raise ModelConfigError(
            f"Adapter {adapter.name!r}: cannot read {config_file} ({exc}); name its base with NAME=PATH@BASE."
        ) from exc
    base = config.get("base_model_name_or_path") if isinstance(config, dict) else None
    if not isinstance(base, str) or not base:
        raise ModelConfigError(
            f"Adapter {adapter.name!r}: {config_file} names no base_model_name_or_path; use NAME=PATH@BASE."
        )
    return base


def find_base(base: str, specs: Iterable[ModelSpec | UpstreamSpec]) -> ModelSpec | UpstreamSpec | None:
    """The served model ``base`` means: by served name first, then by path or folder name."""
    specs = list(specs)
    for spec in specs:
        if spec.name == base:
            return spec
    for spec in specs:
        if isinstance(spec, ModelSpec) and base in (spec.path, Path(spec.path).name):
            return spec
    return None


def attach_adapters(
    specs: dict[str, ModelSpec | UpstreamSpec],
    lora_args: Sequence[str],
    config_adapters: Mapping[str, Mapping[str, str]],
    data_dir: Path,
) -> None:
    """Add the ``--lora`` adapters and each config entry's ``adapters`` to their base specs."""
    wanted: list[tuple[AdapterSpec, str | None, str]] = []
    for value in lora_args:
        name, path, named_base = parse_lora_arg(value)
        wanted.append((adapter_spec(name, path, data_dir), named_base, f"--lora {value!r}"))
    for model, adapters in config_adapters.items():
        for name, path in adapters.items():
            wanted.append((adapter_spec(name, path, data_dir), model, f"{model}.adapters.{name}"))
    taken = set(specs)
    for adapter, base_name, where in wanted:
        if adapter.name in taken:
            raise ModelConfigError(f"{where}: the served name {adapter.name!r} is already taken.")
        taken.add(adapter.name)
        wanted_base = base_name or declared_base(adapter)
        base = find_base(wanted_base, specs.values())
        if base is None:
            raise ModelConfigError(
                f"{where}: its base model {wanted_base!r} is not served (served: {', '.join(specs)})."
            )
        if not isinstance(base, ModelSpec):
            raise ModelConfigError(
                f"{where}: {base.name!r} is served by an upstream; its adapters are the ones it lists itself."
            )
        specs[base.name] = replace(base, adapters=(*base.adapters, adapter))
