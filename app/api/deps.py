"""Dependency aliases shared by the routes."""

from __future__ import annotations

from collections.abc import AsyncIterator
from typing import Annotated, Protocol

from fastapi import Depends, Request
from sqlalchemy.ext.asyncio import AsyncSession

from app.api.runtime import Runtime, runtime_of
from app.core.anthropic_api import MESSAGE_BATCHES_PATH
from app.core.config import Settings
from app.core.input_hygiene import check_json_body, check_text
from app.core.media_types import is_json, takes_multipart
from app.db.engine import Database
from app.db.unit_of_work import after_commit, unit_of_work
from app.storage.base import BlobStore

READ_METHODS = {"GET", "HEAD", "OPTIONS"}
# Where the Idempotency-Key middleware (app/http/idempotency.py) leaves the key a request holds.
HELD_KEY_STATE = "idempotency"


class HeldKey(Protocol):
    """The Idempotency-Key a request holds, as the routes see it."""

    def fence(self, session: AsyncSession, route_path: str | None) -> None: ...

    def answered_on_the_spot(self) -> None: ...


# The dependencies below are `async def` although some never await: FastAPI runs plain `def`
# dependencies in its thread pool, a thread hop per dependency on every request.
async def get_runtime(request: Request) -> Runtime:
    return runtime_of(request.app)


RuntimeDep = Annotated[Runtime, Depends(get_runtime)]


async def get_session(request: Request, runtime: RuntimeDep) -> AsyncIterator[AsyncSession]:
    """One unit of work per request: commit when the route returns, roll back if it raises.
    Reads use the read pool so they never wait on SQLite's single writer."""
    db = runtime.db
    sessions = db.read_sessions if request.method in READ_METHODS else db.write_sessions
    async with unit_of_work(sessions) as session:
        held: HeldKey | None = getattr(request.state, HELD_KEY_STATE, None)
        if held is not None:  # a POST holding its Idempotency-Key: app/http/idempotency_store.py
            held.fence(session, getattr(request.scope.get("route"), "path", None))
        yield session


def not_a_create(request: Request) -> None:
    """The route answers on the spot (a flex call): nothing is kept for repeats of its key."""
    held: HeldKey | None = getattr(request.state, HELD_KEY_STATE, None)
    if held is not None:
        held.answered_on_the_spot()


async def reject_unclean_input(request: Request) -> None:
    """400 for a NUL or a lone surrogate in any path id, query parameter (a cursor, a filter, a
    metadata key) or JSON body member (app/core/input_hygiene.py), on every route, before a
    service or the database sees it."""
    for name, value in request.path_params.items():
        check_text(name, str(value))
    for key, value in request.query_params.multi_items():
        name = key.split("[", 1)[0] or key  # metadata[k]=v is the parameter `metadata`
        check_text(name, key)
        check_text(name, value)
    if request.method == "POST" and request.url.path.rstrip("/") == MESSAGE_BATCHES_PATH:
        return  # up to 256 MiB: checked off the event loop by the service, within its route's cap
    # Every body FastAPI would parse as JSON (any case, `+json` types; one Content-Type only:
    # app/http/body_limit.py), capped by the body limit; an upload's multipart body, streamed by
    # its service without a cap of this size, is never read whole here.
    if is_json(request.headers.get("content-type", "")) and not takes_multipart(request.method, request.scope["path"]):
        check_json_body(await request.body())


async def get_settings(runtime: RuntimeDep) -> Settings:
    return runtime.settings


async def get_store(runtime: RuntimeDep) -> BlobStore:
    return runtime.store


async def get_db(runtime: RuntimeDep) -> Database:
    return runtime.db


# scope="function": commit before the response is sent, so a 200 means the data is stored.
SessionDep = Annotated[AsyncSession, Depends(get_session, scope="function")]
SettingsDep = Annotated[Settings, Depends(get_settings)]
StoreDep = Annotated[BlobStore, Depends(get_store)]
DatabaseDep = Annotated[Database, Depends(get_db)]


class WakeAfterCommit:
    """Wakes this replica's worker once the request's unit of work has committed (so it finds
    the batch just created or cancelled), not at its next poll."""

    def __init__(self, session: AsyncSession, runtime: Runtime) -> None:
        self.session = session
        self.runtime = runtime

    def __call__(self, batch_id: str | None = None) -> None:
        """`batch_id`: a batch whose shards running here must re-read its status at once."""
        runtime = self.runtime

        async def wake() -> None:
            runtime.wake_worker(batch_id)

        after_commit(self.session, wake)


async def get_wake_after_commit(session: SessionDep, runtime: RuntimeDep) -> WakeAfterCommit:
    return WakeAfterCommit(session, runtime)


WakeDep = Annotated[WakeAfterCommit, Depends(get_wake_after_commit)]
