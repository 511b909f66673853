"""What a process starts with, from its settings: the engines of the models it serves, or
:class:`NoModels`. The config is read here; vLLM is imported only when a model runs in this
process, so a server without models, or with upstream models only, never pays for it."""

from __future__ import annotations

import asyncio
import importlib
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any, Literal

from app.core.config import Settings
from app.core.errors import error_envelope
from app.core.statuses import EngineState
from app.engine.config.catalog import resolve_model_specs
from app.engine.config.specs import ModelSpec
from app.engine.config.upstream import UpstreamSpec
from app.engine.errors import ModelConfigError
from app.engine.multiplexer import ServingRegistry
from app.engine.prompt_tokens import estimate_all
from app.engine.protocol import Engines, UpstreamStatus
from app.engine.results import MODEL_NOT_FOUND, LineProblem, LineResult
from app.engine.supervision import RestartPolicy
from app.engine.upstream.registry import DEFAULT_SURPLUS, UpstreamRegistry
from app.scheduling.residency import NO_DEADLINE, Urgency


@dataclass(frozen=True)
class ResidencyLimits:
    """How many in-process engines may be loaded at once (None: all), how long a busy one keeps
    its place and how soon a model may take a busy one's place again (``--max-resident-engines``,
    ``BATCHD_MIN_RESIDENCY_SECONDS``, ``BATCHD_MIN_LOAD_INTERVAL_SECONDS``), and the memory their
    needs must fit in (``--engine-memory-budget``: bytes, ``auto`` or None), and how long an idle
    engine stays idle before it gives way (``BATCHD_ENGINE_DRAIN_GRACE_SECONDS``)."""

    max_resident: int | None = None
    min_seconds: float = 30.0
    min_load_interval: float = 60.0
    memory_budget: int | Literal["auto"] | None = None
    drain_grace: float = 10.0


class NoModels:
    """The engines of a server started with --no-models (nothing is served, so every batch
    fails validation with model_not_found) or --api-only (it runs no batches itself)."""

    ready = True

    def model_cards(self) -> list[dict[str, Any]]:
        return []

    def engine_state(self, model: str) -> EngineState:
        return EngineState.STOPPED

    def engine_ready(self, model: str) -> bool:
        return False

    def endpoints_for(self, model: str) -> set[str]:
        return set()

    def suggested_concurrency(self, model: str) -> int:
        return 1

    def status(self) -> UpstreamStatus:
        return {}

    def engine_problems(self) -> dict[str, str]:
        return {}

    def validate_line(self, endpoint: str, body: Any) -> LineProblem:
        return LineProblem(MODEL_NOT_FOUND, _not_served(body), "body.model")

    def lines_pass(self, endpoint: str, model: str, bodies: Sequence[dict[str, Any]]) -> bool:
        return not bodies  # validate_line refuses every line

    async def count_prompt_tokens(self, endpoint: str, bodies: Sequence[Any]) -> list[int]:
        return estimate_all(endpoint, bodies)

    async def execute(
        self, endpoint: str, body: Any, request_id: str, priority: int = 0, *, urgency: Urgency = NO_DEADLINE
    ) -> LineResult:
        """The answer a server without the model gives: 404 ``model_not_found``, as
        :meth:`validate_line` refuses the line."""
        return LineResult(404, error_envelope(_not_served(body), "NotFoundError", param="model", code=MODEL_NOT_FOUND))

    async def abort(self, request_id: str) -> bool:
        return False

    async def shutdown(self) -> None:
        return None


def _not_served(body: Any) -> str:
    model = body.get("model") if isinstance(body, dict) else None
    return f"The model {model!r} does not exist: this server runs no models."


async def start_registry(settings: Settings) -> Engines:
    """The started engines ``settings`` ask for (:class:`NoModels` with ``no_models``)."""
    if settings.no_models:
        return NoModels()
    specs = resolve_model_specs(
        settings.models, settings.model_config_file, data_dir=settings.data_dir, lora_args=settings.loras
    )
    return await start_serving(
        specs,
        settings.upstream_window_surplus,
        RestartPolicy.from_settings(settings),
        ResidencyLimits(
            settings.max_resident_engines,
            settings.min_residency_seconds,
            settings.min_load_interval_seconds,
            settings.engine_memory_budget,
            settings.engine_drain_grace_seconds,
        ),
    )


async def start_serving(
    specs: Sequence[ModelSpec | UpstreamSpec],
    upstream_window_surplus: float = DEFAULT_SURPLUS,
    restarts: RestartPolicy | None = None,
    residency: ResidencyLimits | None = None,
) -> Engines:
    """Started engines for ``specs``: the in-process ones, the upstream ones, or both behind
    a :class:`~app.engine.multiplexer.ServingRegistry`."""
    names = [spec.name for spec in specs]
    if len(set(names)) != len(names):
        raise ModelConfigError(f"Served model names must be unique: {names}.")
    upstream_specs = [s for s in specs if isinstance(s, UpstreamSpec)]
    local_specs = [s for s in specs if not isinstance(s, UpstreamSpec)]
    upstream = None
    if upstream_specs:
        upstream = UpstreamRegistry(upstream_window_surplus)
        in_process = [name for spec in local_specs for name in (spec.name, *(a.name for a in spec.adapters))]
        await upstream.start(upstream_specs, taken=in_process)
        if not local_specs:
            return upstream
    # Importing vLLM (and torch) takes seconds of CPU: in a thread, so the event loop keeps
    # answering (/health, the Files API) meanwhile; it held the loop 7 s (app/background/loop_watch.py).
    await asyncio.to_thread(importlib.import_module, "app.engine.local.registry")
    from app.engine.local.registry import EngineRegistry

    residency = residency or ResidencyLimits()
    local = EngineRegistry(
        restarts,
        residency.max_resident,
        residency.min_seconds,
        residency.min_load_interval,
        residency.memory_budget,
        residency.drain_grace,
    )
    try:
        await local.start(local_specs)
    except BaseException:
        if upstream is not None:
            await upstream.shutdown()
        raise
    return local if upstream is None else ServingRegistry(local, upstream)
