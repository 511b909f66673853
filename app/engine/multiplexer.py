"""In-process and upstream models side by side, as one :class:`~app.engine.protocol.Engines`.

Only :mod:`app.engine.boot` builds one, when a process serves models of both kinds; every
call goes to the engines that serve the line's model.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from app.core.statuses import EngineState
from app.engine.line_checks import common_line_problem
from app.engine.protocol import Engines, UpstreamStatus
from app.engine.results import LineProblem, LineResult
from app.engine.upstream.registry import UpstreamRegistry
from app.scheduling.residency import NO_DEADLINE, Urgency


class ServingRegistry:
    """In-process and upstream models side by side; each call goes to the one serving the model."""

    def __init__(self, local: Engines, upstream: UpstreamRegistry) -> None:
        self.local = local
        self.upstream = upstream

    @property
    def ready(self) -> bool:
        return self.local.ready and self.upstream.ready

    def model_cards(self) -> list[dict[str, Any]]:
        return [*self.local.model_cards(), *self.upstream.model_cards()]

    def endpoints_for(self, model: str) -> set[str]:
        return self._for(model).endpoints_for(model)

    def engine_state(self, model: str) -> EngineState:
        return self._for(model).engine_state(model)

    def engine_ready(self, model: str) -> bool:
        return self._for(model).engine_ready(model)

    def suggested_concurrency(self, model: str) -> int:
        return self._for(model).suggested_concurrency(model)

    def status(self) -> UpstreamStatus:
        return self.upstream.status()

    def engine_problems(self) -> dict[str, str]:
        return {**self.local.engine_problems(), **self.upstream.engine_problems()}

    def validate_line(self, endpoint: str, body: Any) -> LineProblem | None:
        model = body.get("model") if isinstance(body, dict) else None
        if isinstance(model, str) and not self._serves(model):
            # Served by neither: name every served model in the message.
            served = [*(c["id"] for c in self.local.model_cards()), *self.upstream.names]
            return common_line_problem(endpoint, body, lambda _: None, served)[0]
        return self._for(model).validate_line(endpoint, body)

    def lines_pass(self, endpoint: str, model: str, bodies: Sequence[dict[str, Any]]) -> bool:
        if not self._serves(model):
            return not bodies  # validate_line refuses every line
        return self._for(model).lines_pass(endpoint, model, bodies)

    def _serves(self, model: str) -> bool:
        return model in self.upstream.names or bool(self.local.endpoints_for(model))

    async def count_prompt_tokens(self, endpoint: str, bodies: Sequence[Any]) -> list[int]:
        if not bodies:
            return []
        first = bodies[0]
        return await self._for(first.get("model") if isinstance(first, dict) else None).count_prompt_tokens(
            endpoint, bodies
        )

    async def execute(
        self, endpoint: str, body: Any, request_id: str, priority: int = 0, *, urgency: Urgency = NO_DEADLINE
    ) -> LineResult:
        return await self._for(body.get("model") if isinstance(body, dict) else None).execute(
            endpoint, body, request_id, priority, urgency=urgency
        )

    async def abort(self, request_id: str) -> bool:
        return await self.upstream.abort(request_id) or await self.local.abort(request_id)

    async def shutdown(self) -> None:
        try:
            await self.upstream.shutdown()
        finally:
            await self.local.shutdown()

    def _for(self, model: Any) -> Engines:
        return self.upstream if model in self.upstream.names else self.local
