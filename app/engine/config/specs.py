"""What to serve: :class:`ModelSpec`, ``--model`` strings and the model config file.

``--model`` (repeatable) takes ``PATH_OR_HUB_ID`` or ``SERVED_NAME=PATH_OR_HUB_ID``.
Without a served name, a local directory is served under its folder name and a
hub id under the id itself (``Qwen/Qwen2.5-0.5B-Instruct``). The name of a
built-in model (``batchd-tiny-chat``, ``all-MiniLM-L6-v2``) selects it.

Config file (``--config FILE``; YAML, or JSON since JSON is YAML) maps served
names to engine options::

    models:
      my-chat:                         # the served name (body.model)
        path: /models/qwen2.5-0.5b     # local folder or hub id; default: the name
        runner: generate               # generate | pooling | auto (default auto)
        dtype: bfloat16                # default: float32 on CPU, auto elsewhere
        max_model_len: 4096            # default: the model's own limit
        kv_cache_gib: 4                # KV cache size for this engine, in GiB
        gpu_memory_utilization: 0.4    # or: share of device memory (CPU: of the
                                       # NUMA node's memory) for this engine
        max_num_seqs: 64               # shortcut for engine_args.max_num_seqs
        load: on-demand                # always (default: loaded at start) | on-demand
                                       # (loaded when its lines are due; see
                                       # --max-resident-engines)
        memory_gib: 6                  # the engine's memory need under
                                       # --engine-memory-budget (default: estimated)
        engine_args:                   # any other `vllm serve` option, by its
          enforce_eager: true          # Python name (dashes become underscores)
        pricing:                       # the Costs API's prices (see .pricing)
          input: 0.15                  # per million tokens
          output: 0.60
        adapters:                      # LoRA adapters served on this model's engine,
          my-chat-legal: /adapters/legal   # by served name: a PEFT folder (or
                                       # batchd-tiny-lora, the built-in one)
      all-MiniLM-L6-v2:                # a built-in name: options apply to it
        max_model_len: 256

Entries whose name also appears in ``--model`` only add options to it; the
others are served as well. If neither ``--model`` nor the config names a
model, the built-in models are served.

``--lora NAME=PATH[@BASE]`` (repeatable) adds an adapter the same way; its base is
``@BASE`` or else the ``base_model_name_or_path`` of the adapter's ``adapter_config.json``
(see :mod:`app.engine.config.adapters`).

A model can instead be served by existing OpenAI-compatible servers: ``--model
NAME=http://host:8000/v1`` or an ``upstream:`` block (see :mod:`app.engine.config.upstream`).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any, Literal

from app.engine.config.pricing import ModelPrice, check_pricing
from app.engine.config.upstream import check_upstream_options
from app.engine.errors import ModelConfigError

Runner = Literal["auto", "generate", "pooling"]
RUNNERS: tuple[str, ...] = ("auto", "generate", "pooling")
Load = Literal["always", "on-demand"]
LOADS: tuple[str, ...] = ("always", "on-demand")

_SIMPLE_OPTIONS: dict[str, type | tuple[type, ...]] = {
    "path": str,
    "runner": str,
    "dtype": str,
    "max_model_len": int,
    "kv_cache_gib": (int, float),
    "gpu_memory_utilization": (int, float),
    "max_num_seqs": int,
    "load": str,
    "memory_gib": (int, float),
}


@dataclass(frozen=True)
class AdapterSpec:
    """A LoRA adapter served under its own name on its base model's engine.

    ``builder`` makes the adapter files on first use (the built-in adapter only)."""

    name: str
    path: str
    builder: Callable[[Path], Path] | None = field(default=None, compare=False, repr=False)


@dataclass(frozen=True)
class ModelSpec:
    """One model to serve and the engine options to start it with.

    ``kv_cache_gib`` and ``gpu_memory_utilization`` are alternatives; with
    neither set the registry picks a small per-engine default so several
    engines fit in one process. ``engine_args`` carries any other
    ``vllm serve`` option (engine or frontend) by its Python name.
    ``builder`` makes the model files on first use (built-in models only).
    ``adapters`` are the LoRA adapters served on this model's engine.
    ``load`` says whether its engine is loaded at start (``always``, within
    ``--max-resident-engines``) or only once its lines are due (``on-demand``).
    ``memory_gib`` is its engine's memory need under ``--engine-memory-budget`` (None: estimated,
    :mod:`app.engine.local.memory`).
    """

    name: str
    path: str
    runner: Runner = "auto"
    dtype: str | None = None
    max_model_len: int | None = None
    kv_cache_gib: float | None = None
    gpu_memory_utilization: float | None = None
    engine_args: Mapping[str, Any] = field(default_factory=dict)
    builder: Callable[[Path], Path] | None = field(default=None, compare=False, repr=False)
    adapters: tuple[AdapterSpec, ...] = ()
    load: Load = "always"
    memory_gib: float | None = None

    def __post_init__(self) -> None:
        if not self.name:
            raise ModelConfigError("A model's served name must not be empty.")
        if self.runner not in RUNNERS:
            raise ModelConfigError(
                f"Model {self.name!r}: runner must be one of {', '.join(RUNNERS)}, not {self.runner!r}."
            )
        if self.load not in LOADS:
            raise ModelConfigError(f"Model {self.name!r}: load must be one of {', '.join(LOADS)}, not {self.load!r}.")
        if self.memory_gib is not None and self.memory_gib <= 0:
            raise ModelConfigError(f"Model {self.name!r}: memory_gib must be more than 0, not {self.memory_gib!r}.")
        if self.kv_cache_gib is not None and self.gpu_memory_utilization is not None:
            raise ModelConfigError(f"Model {self.name!r}: set kv_cache_gib or gpu_memory_utilization, not both.")

    def with_options(self, options: Mapping[str, Any]) -> ModelSpec:
        """Return a copy with config-file ``options`` (already checked) applied."""
        options = dict(options)
        engine_args = {**self.engine_args, **options.pop("engine_args", {})}
        if "max_num_seqs" in options:
            engine_args["max_num_seqs"] = options.pop("max_num_seqs")
        if "kv_cache_gib" in options:
            options.setdefault("gpu_memory_utilization", None)
        elif "gpu_memory_utilization" in options:
            options.setdefault("kv_cache_gib", None)
        if "path" in options and options["path"] != self.path:
            # New files: the built-in builder no longer applies.
            options["builder"] = None
        return replace(self, engine_args=engine_args, **options)


def parse_model_arg(value: str) -> tuple[str, str]:
    """Split a ``--model`` value into ``(served_name, path_or_hub_id)``."""
    value = value.strip()
    if not value:
        raise ModelConfigError("--model must not be empty.")
    name, sep, path = value.partition("=")
    # Only a left side without slashes is a served name; paths may contain '='.
    if sep and name and "/" not in name and path:
        return name.strip(), path.strip()
    return default_served_name(value), value


def default_served_name(path_or_id: str) -> str:
    """The served name of a model given without one (see module docstring)."""
    local = Path(path_or_id).expanduser()
    if local.is_dir():
        return local.resolve().name
    return path_or_id


def load_model_config(source: str | Path | Mapping[str, Any] | None) -> dict[str, dict[str, Any]]:
    """Read a config file (or an already-parsed mapping) into ``{name: options}``.

    Raises :class:`ModelConfigError` on unknown keys or wrong types, so a typo
    fails at start-up instead of being silently ignored.
    """
    if source is None:
        return {}
    if isinstance(source, Mapping):
        data: Any = source
        where = "model config"
    else:
        import yaml

        where = str(source)
        try:
            data = yaml.safe_load(Path(source).read_text(encoding="utf-8")) or {}
        except (OSError, yaml.YAMLError) as exc:
            raise ModelConfigError(f"Cannot read model config {where}: {exc}") from exc
    if not isinstance(data, Mapping):
        raise ModelConfigError(f"{where}: the top level must be a mapping.")
    unknown = set(data) - {"models"}
    if unknown:
        raise ModelConfigError(f"{where}: unknown top-level keys {sorted(unknown)}.")
    models = data.get("models") or {}
    if not isinstance(models, Mapping):
        raise ModelConfigError(f"{where}: 'models' must map served names to options.")
    return {str(name): _check_options(where, str(name), opts) for name, opts in models.items()}


def _check_options(where: str, name: str, options: Any) -> dict[str, Any]:
    if options is None:
        return {}
    if not isinstance(options, Mapping):
        raise ModelConfigError(f"{where}: options of model {name!r} must be a mapping.")
    checked: dict[str, Any] = {}
    for key, value in options.items():
        if key == "upstream":
            checked[key] = check_upstream_options(where, name, value)
            continue
        if key == "pricing":
            checked[key] = check_pricing(where, name, value)
            continue
        if key == "adapters":
            if not isinstance(value, Mapping) or not all(isinstance(p, str) and p for p in value.values()):
                raise ModelConfigError(f"{where}: {name}.adapters must map served names to adapter paths.")
            checked[key] = {str(k): v for k, v in value.items()}
            continue
        if key == "engine_args":
            if not isinstance(value, Mapping):
                raise ModelConfigError(f"{where}: {name}.engine_args must be a mapping.")
            checked[key] = {str(k).replace("-", "_"): v for k, v in value.items()}
            continue
        expected = _SIMPLE_OPTIONS.get(key)
        if expected is None:
            allowed = ", ".join([*_SIMPLE_OPTIONS, "engine_args", "adapters", "upstream", "pricing"])
            raise ModelConfigError(f"{where}: unknown option {name}.{key} (allowed: {allowed}).")
        if value is not None and (isinstance(value, bool) or not isinstance(value, expected)):
            raise ModelConfigError(f"{where}: {name}.{key} has the wrong type ({value!r}).")
        if key in ("kv_cache_gib", "gpu_memory_utilization", "memory_gib") and isinstance(value, int | float):
            value = float(value)
        checked[key] = value
    return checked


@dataclass(frozen=True)
class ModelTable:
    """What the config file says of each model beyond how to serve it, by served name: its price
    (the Costs API's, quotes') and its `max_model_len`. Read once as the engines start."""

    prices: Mapping[str, ModelPrice] = field(default_factory=dict)
    context_lengths: Mapping[str, int] = field(default_factory=dict)


def load_model_table(source: str | Path | Mapping[str, Any] | None) -> ModelTable:
    options = load_model_config(source)
    return ModelTable(
        prices={name: opts["pricing"] for name, opts in options.items() if "pricing" in opts},
        context_lengths={name: opts["max_model_len"] for name, opts in options.items() if opts.get("max_model_len")},
    )


def load_prices(source: str | Path | Mapping[str, Any] | None) -> dict[str, ModelPrice]:
    """The Costs API's price of every model the config file prices, by served name."""
    return dict(load_model_table(source).prices)
