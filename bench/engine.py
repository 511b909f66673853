"""One workload's engine settings, rendered for each system so that all of them start vLLM
with the same model, dtype, context length, KV cache size, batch limits and prefix caching.

The KV cache size is passed as bytes (``kv_cache_memory_bytes`` / ``--kv-cache-memory-bytes``)
to the limit and the peer, and as ``kv_cache_gib`` to batchd, which turns it into the same byte
count. ``VLLM_CPU_KVCACHE_SPACE`` is not used: it takes whole GiB only and would override the
explicit size, so no system's environment has it (see :func:`engine_env`).
"""

from __future__ import annotations

import json
import os
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

GIB = 1 << 30


@dataclass(frozen=True)
class EngineSettings:
    """What every system's engine is started with for one workload.

    ``max_num_batched_tokens`` is explicit because vLLM's default for it (and for
    ``max_num_seqs``) depends on the entry point (``LLM`` vs. server vs. batch runner).
    ``kv_cache_gib`` should be a binary fraction (0.25, 0.0625) so the byte count is exact.
    """

    served_name: str
    path: str
    runner: str
    max_model_len: int
    kv_cache_gib: float
    max_num_seqs: int
    max_num_batched_tokens: int
    enable_prefix_caching: bool
    dtype: str = "float32"
    # Skips torch.compile: ~10 s less start-up per engine, for smoke runs only (reported
    # runs compile, as users' engines do).
    enforce_eager: bool = False

    @property
    def kv_cache_bytes(self) -> int:
        """The KV cache size exactly as batchd computes it from ``kv_cache_gib``."""
        return int(self.kv_cache_gib * GIB)

    def llm_kwargs(self) -> dict[str, Any]:
        """Keyword arguments for ``vllm.LLM`` (the limit system)."""
        return {
            "model": self.path,
            "served_model_name": self.served_name,
            "runner": self.runner,
            "dtype": self.dtype,
            "max_model_len": self.max_model_len,
            "kv_cache_memory_bytes": self.kv_cache_bytes,
            "max_num_seqs": self.max_num_seqs,
            "max_num_batched_tokens": self.max_num_batched_tokens,
            "enable_prefix_caching": self.enable_prefix_caching,
            "enforce_eager": self.enforce_eager,
        }

    def vllm_flags(self) -> list[str]:
        """Engine flags for ``python -m vllm.entrypoints.openai.run_batch`` (the peer)."""
        return [
            "--model",
            self.path,
            "--served-model-name",
            self.served_name,
            "--runner",
            self.runner,
            "--dtype",
            self.dtype,
            "--max-model-len",
            str(self.max_model_len),
            "--kv-cache-memory-bytes",
            str(self.kv_cache_bytes),
            "--max-num-seqs",
            str(self.max_num_seqs),
            "--max-num-batched-tokens",
            str(self.max_num_batched_tokens),
            "--enable-prefix-caching" if self.enable_prefix_caching else "--no-enable-prefix-caching",
            *(["--enforce-eager"] if self.enforce_eager else []),
        ]

    def batchd_config(self) -> dict[str, Any]:
        """The ``--config`` document for ``batchd serve`` and ``batchd run-batch``."""
        return {
            "models": {
                self.served_name: {
                    "path": self.path,
                    "runner": self.runner,
                    "dtype": self.dtype,
                    "max_model_len": self.max_model_len,
                    "kv_cache_gib": self.kv_cache_gib,
                    "max_num_seqs": self.max_num_seqs,
                    "engine_args": {
                        "max_num_batched_tokens": self.max_num_batched_tokens,
                        "enable_prefix_caching": self.enable_prefix_caching,
                        "enforce_eager": self.enforce_eager,
                    },
                }
            }
        }

    def write_batchd_config(self, path: Path) -> Path:
        """Write :meth:`batchd_config` as JSON (JSON is YAML) and return ``path``."""
        path.write_text(json.dumps(self.batchd_config(), indent=2) + "\n")
        return path

    def to_json(self) -> str:
        return json.dumps(asdict(self))

    @classmethod
    def from_json(cls, text: str) -> EngineSettings:
        return cls(**json.loads(text))


# Set for every system: offline, unbuffered, vLLM logging at INFO (the peer's processing start
# is read from its log).
ENGINE_ENV = {
    "HF_HUB_OFFLINE": "1",
    "TRANSFORMERS_OFFLINE": "1",
    "PYTHONUNBUFFERED": "1",
    "VLLM_LOGGING_LEVEL": "INFO",
    "VLLM_CONFIGURE_LOGGING": "1",
}
LEGACY_KV_CACHE_ENV = "VLLM_CPU_KVCACHE_SPACE"


def engine_env(extra: dict[str, str] | None = None) -> dict[str, str]:
    """The environment a system's process runs in: this one without the legacy KV cache
    override, plus :data:`ENGINE_ENV` and ``extra``."""
    env = {k: v for k, v in os.environ.items() if k != LEGACY_KV_CACHE_ENV}
    return {**env, **ENGINE_ENV, **(extra or {})}
