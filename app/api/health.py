"""Liveness and readiness for orchestrators (no key needed). Details (upstream URLs' states, why
an engine is down) only for an admin caller: the front door (app/http/front_door.py) says who asks."""

import asyncio
import logging
import time

from fastapi import APIRouter, Request
from fastapi.responses import JSONResponse

from app.api.deps import RuntimeDep
from app.api.runtime import Runtime
from app.core.statuses import EngineState

router = APIRouter(tags=["health"])
log = logging.getLogger("batchd.health")

# A database slower than this to answer a trivial query is not ready.
DATABASE_TIMEOUT_SECONDS = 5.0

_STATE = {
    "content": {
        "application/json": {
            "schema": {
                "type": "object",
                "required": ["status", "replica"],
                "properties": {
                    "status": {"type": "string"},
                    "replica": {"type": "string"},
                    "database": {"type": "string"},
                    "upstreams": {},
                    "engines": {"type": "object", "additionalProperties": {"type": "string"}},
                    "error": {"type": "string"},
                },
            }
        }
    }
}


@router.get("/health/live", responses={200: {"description": "The process and its event loop answer"}})
async def live() -> dict[str, str]:
    """Liveness: answers while the process and its event loop do; reads no engine or database."""
    return {"status": "ok"}


async def _database_down_for(runtime: Runtime) -> float | None:
    """Seconds since the database stopped answering (0 at the first failure), None while it answers."""
    try:
        await asyncio.wait_for(runtime.db.ping(), DATABASE_TIMEOUT_SECONDS)
    except Exception as exc:  # noqa: BLE001 - any failure to answer is "not ready"
        log.warning("readiness: the database does not answer: %r", exc)
        now = time.monotonic()
        if runtime.database_down_since is None:
            runtime.database_down_since = now
        return now - runtime.database_down_since
    runtime.database_down_since = None
    return None


# /health's status when the engines could not start (the cause under `error`, for an admin).
ENGINES_FAILED = "engines failed to start"


def _engines(runtime: Runtime) -> tuple[str, dict]:
    """The engines' status ("ok" when every one serves) and the details behind it."""
    registry = runtime.engines
    if runtime.engines_failed is not None:
        # The server is on its way out (`batchd serve` exits non-zero); an admin sees why.
        return ENGINES_FAILED, {"error": runtime.engines_failed}
    if not runtime.ready or registry is None:
        return EngineState.STARTING, {}
    upstreams = registry.status()
    details: dict[str, object] = {"upstreams": upstreams} if upstreams else {}
    if registry.ready:
        return "ok", details
    # Why: an engine restarting after its core died, or backing off after too many deaths (until when).
    problems = registry.engine_problems()
    return "engine unavailable", details | ({"engines": problems} if problems else {})


@router.get(
    "/health",
    responses={
        200: {
            "description": "The database answers (or not for less than the grace) and every engine is ready",
            **_STATE,
        },
        503: {"description": "Engines are loading or one is down, or the database does not answer", **_STATE},
    },
)
async def health(request: Request, runtime: RuntimeDep) -> JSONResponse:
    """Readiness: 200 while the database answers and every model engine is loaded and alive (an
    upstream model: while one of its URLs is in the rotation; a model served on demand need
    not be loaded, only the engines that are must be alive); 503 otherwise. A database that has
    not answered for less than BATCHD_READINESS_DB_GRACE_SECONDS keeps it 200, with
    ``database`` saying so. An admin key also sees the details: upstream URLs' states under
    ``upstreams``, and why a model takes no lines under ``engines``."""
    status, details = _engines(runtime)
    body = {"status": status, "replica": runtime.settings.replica_id}
    if status == "ok" and (down_for := await _database_down_for(runtime)) is not None:
        # A blip shorter than the grace (a failover, a restart) keeps the replica in rotation:
        # taking every replica out at once turns it into an outage of the whole service.
        grace = runtime.settings.readiness_db_grace_seconds
        body["database"] = f"not answering for {down_for:.0f} s (readiness grace {grace:g} s)"
        if down_for >= grace:
            body["status"] = status = "database unavailable"
    caller = getattr(request.state, "caller", None)
    if caller is not None and caller.is_admin:
        body |= details
    return JSONResponse(body, status_code=200 if status == "ok" else 503)
