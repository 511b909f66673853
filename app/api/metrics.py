"""`GET /metrics`: Prometheus text format. Open unless BATCHD_METRICS_TOKEN is set, then it
needs that token as a Bearer header (errors in OpenAI's envelope, like every other route)."""

from __future__ import annotations

import hmac

from fastapi import APIRouter, Request
from fastapi.responses import Response

from app.api.deps import RuntimeDep
from app.core import metrics
from app.core.errors import ErrorResponse, Unauthorized

router = APIRouter(tags=["monitoring"])


def _check_token(request: Request, token: str | None) -> None:
    if not token:
        return
    scheme, _, given = (request.headers.get("authorization") or "").partition(" ")
    if scheme.lower() != "bearer" or not hmac.compare_digest(given.strip().encode(), token.encode()):
        raise Unauthorized(
            "Invalid or missing metrics token: send 'Authorization: Bearer <token>'.", code="invalid_api_key"
        )


@router.get(
    "/metrics",
    response_class=Response,
    responses={
        200: {"description": "Prometheus text format", "content": {"text/plain": {"schema": {"type": "string"}}}},
        401: {"model": ErrorResponse, "description": "BATCHD_METRICS_TOKEN is set and was not sent"},
    },
)
async def scrape(request: Request, runtime: RuntimeDep) -> Response:
    """The current values: engine states read now, batch counts at most metrics_cache_seconds old."""
    _check_token(request, runtime.settings.metrics_token)
    metrics.set_batch_counts(await runtime.batch_counts.get(runtime.db, runtime.settings.metrics_cache_seconds))
    registry = runtime.engines
    if registry is not None:
        metrics.set_engines_up({card["id"]: registry.engine_ready(card["id"]) for card in registry.model_cards()})
    body, content_type = metrics.exposition()
    return Response(body, media_type=content_type)
