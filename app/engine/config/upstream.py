"""What an upstream-backed model is: :class:`UpstreamSpec`, from ``--model NAME=URL`` or the
``upstream:`` block of a model in the config file::

    models:
      qwen:
        upstream:
          urls: [http://vllm-0:8000/v1, http://vllm-1:8000/v1]
          model: Qwen/Qwen2.5-7B-Instruct   # the name at the upstream (default: the served name)
          api_key_env: QWEN_API_KEY         # its value is sent as a Bearer token (optional)
          max_concurrency: 64               # requests in flight per URL (default 64)
          timeout_s: 600                    # per request attempt (default 600)
          deadline_s: 3600                  # per line, retries included (default 3 x timeout_s)
          health_interval_s: 10             # how often GET {url}/models runs (default 10)
          priority: true                    # send each line with vLLM's `priority`, from its
                                            # batch's deadline (default false; the servers need
                                            # --scheduling-policy priority)
          adapters: false                   # serve the LoRA adapters the URLs list on the model
                                            # (GET /models cards whose `parent` is it; default true)
          endpoints: [/v1/chat/completions, /v1/embeddings]   # default: chat, completions,
                                                              # responses, messages, embeddings

No vLLM here: an upstream-only server never imports it.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, replace
from typing import Any

from app.core.endpoints import CHAT_COMPLETIONS, COMPLETIONS, EMBEDDINGS, MESSAGES, RESPONSES, normalize_endpoint
from app.engine.errors import ModelConfigError

DEFAULT_ENDPOINTS: frozenset[str] = frozenset({CHAT_COMPLETIONS, COMPLETIONS, RESPONSES, MESSAGES, EMBEDDINGS})

_NUMBERS: dict[str, type | tuple[type, ...]] = {
    "max_concurrency": int,
    "timeout_s": (int, float),
    "deadline_s": (int, float),
    "health_interval_s": (int, float),
}
_SWITCHES = ("priority", "adapters")
_OPTIONS = ("urls", "model", "api_key_env", "endpoints", *_SWITCHES, *_NUMBERS)


def is_upstream_url(value: str) -> bool:
    """A ``--model`` value (or one of its comma-separated parts) naming an HTTP upstream."""
    return value.strip().lower().startswith(("http://", "https://"))


@dataclass(frozen=True)
class UpstreamSpec:
    """A served model whose lines go to OpenAI-compatible servers at ``urls`` (each ending
    in ``/v1``), under the name ``model`` there."""

    name: str
    urls: tuple[str, ...]
    model: str = ""
    api_key_env: str | None = None
    max_concurrency: int = 64
    timeout_s: float = 600.0
    deadline_s: float | None = None
    health_interval_s: float = 10.0
    endpoints: frozenset[str] = DEFAULT_ENDPOINTS
    # Off by default: older vLLM releases refuse a non-zero priority unless the server runs
    # with --scheduling-policy priority (0.32 accepts and ignores it).
    priority: bool = False
    # The LoRA adapters the URLs list on the model (`vllm serve --lora-modules`), each served
    # under its own id (see app.engine.upstream.registry).
    adapters: bool = True

    def __post_init__(self) -> None:
        if not self.urls:
            raise ModelConfigError(f"Model {self.name!r}: an upstream needs at least one URL.")
        bad = [u for u in self.urls if not is_upstream_url(u)]
        if bad:
            raise ModelConfigError(f"Model {self.name!r}: upstream URLs must be http(s): {bad}.")
        if len(set(self.urls)) != len(self.urls):
            raise ModelConfigError(f"Model {self.name!r}: an upstream URL is given twice.")
        for key in _NUMBERS:
            value = getattr(self, key)
            if value is not None and value <= 0:
                raise ModelConfigError(f"Model {self.name!r}: upstream.{key} must be positive.")
        if not self.endpoints:
            raise ModelConfigError(f"Model {self.name!r}: upstream.endpoints must not be empty.")

    @property
    def upstream_model(self) -> str:
        return self.model or self.name

    @property
    def line_deadline_s(self) -> float:
        return self.deadline_s if self.deadline_s is not None else 3 * self.timeout_s

    def with_options(self, options: Mapping[str, Any]) -> UpstreamSpec:
        """A copy with the checked ``upstream:`` options applied (URLs there replace ours)."""
        return replace(self, **options)


def upstream_from_arg(name: str, value: str) -> UpstreamSpec:
    """``--model NAME=URL[,URL...]`` as a spec."""
    urls = tuple(_clean_url(u) for u in value.split(",") if u.strip())
    return UpstreamSpec(name=name, urls=urls)


def merge_urls(spec: UpstreamSpec, more: UpstreamSpec) -> UpstreamSpec:
    """The same model given by ``--model`` twice: its URLs add up."""
    return replace(spec, urls=spec.urls + tuple(u for u in more.urls if u not in spec.urls))


def check_upstream_options(where: str, name: str, block: Any) -> dict[str, Any]:
    """Type-check an ``upstream:`` block; unknown keys fail start-up rather than being ignored."""
    if not isinstance(block, Mapping):
        raise ModelConfigError(f"{where}: {name}.upstream must be a mapping.")
    checked: dict[str, Any] = {}
    for key, value in block.items():
        if key not in _OPTIONS:
            raise ModelConfigError(f"{where}: unknown option {name}.upstream.{key} (allowed: {', '.join(_OPTIONS)}).")
        if key == "urls":
            urls = [value] if isinstance(value, str) else value
            if not isinstance(urls, list) or not all(isinstance(u, str) for u in urls):
                raise ModelConfigError(f"{where}: {name}.upstream.urls must be a list of URLs.")
            checked[key] = tuple(_clean_url(u) for u in urls)
        elif key == "endpoints":
            if not isinstance(value, list) or not value:
                raise ModelConfigError(f"{where}: {name}.upstream.endpoints must be a list of URLs.")
            canonical = [normalize_endpoint(v) for v in value]
            if None in canonical:
                raise ModelConfigError(f"{where}: {name}.upstream.endpoints has an unknown endpoint ({value}).")
            checked[key] = frozenset(canonical)
        elif key in ("model", "api_key_env"):
            if not isinstance(value, str) or not value:
                raise ModelConfigError(f"{where}: {name}.upstream.{key} must be a non-empty string.")
            checked[key] = value
        elif key in _SWITCHES:
            if not isinstance(value, bool):
                raise ModelConfigError(f"{where}: {name}.upstream.{key} must be true or false ({value!r}).")
            checked[key] = value
        else:
            if isinstance(value, bool) or not isinstance(value, _NUMBERS[key]):
                raise ModelConfigError(f"{where}: {name}.upstream.{key} has the wrong type ({value!r}).")
            checked[key] = value
    return checked


def _clean_url(url: str) -> str:
    return url.strip().rstrip("/")
