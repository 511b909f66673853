"""Liveness/readiness (unauthenticated)."""

from fastapi import APIRouter
from fastapi.responses import JSONResponse

from app.api.deps import RuntimeDep
from app.core.statuses import EngineState

router = APIRouter(tags=["health"])


_STATE = {
    "content": {
        "application/json": {
            "schema": {
                "type": "object",
                "required": ["status", "replica"],
                "properties": {"status": {"type": "string"}, "replica": {"type": "string"}, "upstreams": {}},
            }
        }
    }
}


@router.get(
    "/health",
    responses={
        200: {"description": "Every engine is ready", **_STATE},
        503: {"description": "Engines are loading or one is down", **_STATE},
    },
)
async def health(runtime: RuntimeDep) -> JSONResponse:
    """200 once every model engine is loaded and while all of them are alive (an upstream
    model: while one of its URLs is in the rotation); 503 otherwise. Upstream URLs' states
    are listed under ``upstreams``."""
    replica = runtime.settings.replica_id
    registry = runtime.engines
    if not runtime.ready or registry is None:
        return JSONResponse({"status": EngineState.STARTING, "replica": replica}, status_code=503)
    upstreams = registry.status()
    extra = {"upstreams": upstreams} if upstreams else {}
    if not registry.ready:
        return JSONResponse({"status": "engine unavailable", "replica": replica, **extra}, status_code=503)
    return JSONResponse({"status": "ok", "replica": replica, **extra})
