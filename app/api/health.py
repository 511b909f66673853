"""Liveness/readiness (unauthenticated)."""

from fastapi import APIRouter, Request
from fastapi.responses import JSONResponse

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
async def health(request: Request) -> JSONResponse:
    """200 once every model engine is loaded and while all of them are alive (an upstream
    model: while one of its URLs is in the rotation); 503 otherwise. Upstream URLs' states
    are listed under ``upstreams``."""
    state = request.app.state
    replica = state.settings.replica_id
    registry = getattr(state, "registry", None)
    if not getattr(state, "ready", False) or registry is None:
        return JSONResponse({"status": "starting", "replica": replica}, status_code=503)
    upstreams = registry.status()
    extra = {"upstreams": upstreams} if upstreams else {}
    if not registry.ready:
        return JSONResponse({"status": "engine unavailable", "replica": replica, **extra}, status_code=503)
    return JSONResponse({"status": "ok", "replica": replica, **extra})
