"""Which platform vLLM runs its engines on, asked only when an engine starts: importing vLLM
costs seconds of CPU, which modules that merely define how engines start should not pay."""

from __future__ import annotations


def engine_runs_on_cpu() -> bool:
    from app.engine.vllm_api import current_platform

    return bool(current_platform.is_cpu())
