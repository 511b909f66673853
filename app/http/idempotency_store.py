"""Idempotency-Key: a POST repeated with the same key, by the same API key, gets the first
response again instead of doing the work twice: an orchestrator that retries a timed-out create
makes one batch, not two. The rules:

- A record belongs to the API key that made it (its id and admin flag): the same key sent by
  another API key is another record, so that request runs, authorization and all, as if new.
- The first request holds the key while it runs (a lease it renews, through database errors; a
  dead replica's lapses). The route's own transaction checks the lease (`fence`): a holder that
  lost it rolls back instead of committing a second object.
- Only creates (`CREATES`) keep a response, once they succeed (2xx): the response body, counted
  in the project's storage and capped per project (`project_max_idempotency_bytes`); a response
  that carries a secret (a key's value, a signing secret), or does not fit, is not kept: a repeat
  is answered from the made object's retrieve (no secret). Any other POST (a cancel, a flex or
  Responses answer computed on the spot) keeps nothing: a repeat runs again.
- A repeat waits while the key is held (a concurrent duplicate, on any replica) by reading the
  record with backoff, then gets the kept response if it is the same request (same
  fingerprint), else 409.
- A key is kept `idempotency_key_hours` after its first use; older, it is as if never used.

Why two transactions for a create: the route's own one marks the record committed (so the work is
never done twice, whatever happens next), but the response bytes (and the made object's id, for
the retrieve path) exist only once FastAPI has serialized the route's return value, after the
session dependency committed; they are written by one short transaction just after. A replica
that stops in between leaves a record a repeat answers 409 `idempotency_response_not_kept`."""

from __future__ import annotations

import asyncio
import logging
import time
import uuid
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from dataclasses import dataclass

from sqlalchemy.ext.asyncio import AsyncSession

from app.core.anthropic_api import MESSAGE_BATCHES_PATH
from app.core.config import Settings
from app.core.errors import Conflict, InvalidRequest
from app.db.engine import Database
from app.db.models import IdempotencyKey
from app.db.repositories.idempotency_keys import IdempotencyKeyRepository, RecordId
from app.db.unit_of_work import after_commit, before_commit
from app.domains.limits.quotas_repository import QuotaRepository

log = logging.getLogger("batchd.idempotency")

HEADER = "idempotency-key"
MAX_KEY_LENGTH = 255
# A holder renews its lease every third of it; a key whose holder died is free after it.
LEASE_SECONDS = 60.0
# A renewal that fails (the database restarting) is tried again after these, doubling.
RENEW_RETRY_SECONDS, LONGEST_RENEW_RETRY = 0.5, 5.0
# A waiting repeat reads the record after these, doubling.
FIRST_POLL_SECONDS, LONGEST_POLL_SECONDS = 0.05, 2.0
# A repeat waits this long for the first request at most (a large upload's time), then gets a 409.
MAX_WAIT_SECONDS = 600.0
# Create responses are small objects; a larger one is answered from its retrieve instead.
MAX_KEPT_BODY = 64 * 1024


@dataclass(frozen=True)
class Create:
    """A POST that makes something: a repeat gets its response again, or (`secret`: the
    response carries a key's value or a signing secret, never stored) the made object as
    `retrieve` shows it. `retrieve` is a GET path template: the route's path parameters and
    `{id}`, the made object's id (None: the object has no retrieve)."""

    retrieve: str | None
    secret: bool = False


_PROJECTS = "/v1/organization/projects"
# By route path. A POST not named here keeps nothing for repeats (secure by default).
CREATES: dict[str, Create] = {
    "/v1/files": Create("/v1/files/{id}"),
    "/v1/uploads": Create(None),
    "/v1/uploads/{upload_id}/parts": Create(None),
    "/v1/uploads/{upload_id}/complete": Create(None),
    "/v1/batches": Create("/v1/batches/{id}"),
    "/v1/batches/{batch_id}/retry": Create("/v1/batches/{id}"),
    MESSAGE_BATCHES_PATH: Create(MESSAGE_BATCHES_PATH + "/{id}"),
    # A background response; a flex one is an answer (`not_a_create`).
    "/v1/responses": Create("/v1/responses/{id}"),
    _PROJECTS: Create(_PROJECTS + "/{id}"),
    _PROJECTS + "/{project_id}/service_accounts": Create(
        _PROJECTS + "/{project_id}/service_accounts/{id}", secret=True
    ),
    "/v1/organization/admin_api_keys": Create("/v1/organization/admin_api_keys/{id}", secret=True),
    "/v1/webhook_endpoints": Create("/v1/webhook_endpoints/{id}", secret=True),
    "/v1/webhook_endpoints/{endpoint_id}/rotate_secret": Create("/v1/webhook_endpoints/{endpoint_id}", secret=True),
}


# Where the middleware leaves the request's Held for the route's transaction (ASGI state).
@dataclass
class Held:
    """This request holds the key: it runs, then completes or releases it. `committed` once the
    route's transaction committed under the lease; `lost` once a renewal found it taken over;
    `answer` when the route answered on the spot (not a create, whatever its path)."""

    record: RecordId
    owner: str
    committed: bool = False
    lost: bool = False
    answer: bool = False

    def fence(self, session: AsyncSession, route_path: str | None) -> None:
        fence(session, self, route_path)

    def answered_on_the_spot(self) -> None:
        self.answer = True


@dataclass(frozen=True)
class Kept:
    """What the first request with this key left for repeats: its body, or the path of what it
    made (neither: it committed but nothing fitted, or its replica stopped first)."""

    fingerprint: str | None
    status_code: int
    content_type: str
    body: bytes | None
    retrieve_path: str | None


@dataclass(frozen=True)
class NotBound:
    """The record is this API key's but was made while its admin flag differed: run as new."""


def check_key(key: str) -> str:
    """The key as sent, or 400: 1-255 printable ASCII characters."""
    if not 0 < len(key) <= MAX_KEY_LENGTH or not key.isascii() or not key.isprintable():
        raise InvalidRequest(
            f"Invalid Idempotency-Key: use 1 to {MAX_KEY_LENGTH} printable ASCII characters.", param=HEADER
        )
    return key


def different_request(key: str) -> Conflict:
    return Conflict(
        f"Idempotency-Key '{key}' was already used with a different request; use a new key for a new request.",
        param=HEADER,
        code="idempotency_key_reused",
    )


def nothing_kept(key: str) -> Conflict:
    return Conflict(
        f"The request with Idempotency-Key '{key}' was done, but no response was kept for it (the "
        "server stopped first, or it did not fit): list to find what it made, or use a new key.",
        param=HEADER,
        code="idempotency_response_not_kept",
    )


def _in_use(key: str) -> Conflict:
    return Conflict(
        f"A request with Idempotency-Key '{key}' is still being processed; retry later.",
        param=HEADER,
        code="idempotency_key_in_use",
    )


def create_of(route_path: str | None, held: Held) -> Create | None:
    """The route's Create rule, None if it keeps nothing (not a create, or it answered)."""
    return None if route_path is None or held.answer else CREATES.get(route_path)


def fence(session: AsyncSession, held: Held, route_path: str | None) -> None:
    """Tie the route's transaction to the lease: just before it commits, the record must still
    be this holder's (else the transaction rolls back with a 409: the key's new holder answers);
    a create's record is marked committed in that same transaction, so a repeat never runs it
    again, whatever happens to this replica after."""
    create = False

    async def check() -> None:
        nonlocal create
        create = create_of(route_path, held) is not None
        if not await IdempotencyKeyRepository(session).mark_committed(held.record, held.owner, create):
            raise _in_use(held.record.key)

    async def committed() -> None:
        held.committed = create

    before_commit(session, check)
    after_commit(session, committed)


def _kept(row: IdempotencyKey) -> Kept:
    return Kept(
        row.fingerprint,
        row.status_code or 200,
        row.content_type or "application/json",
        row.body,
        row.retrieve_path,
    )


class IdempotentRequests:
    def __init__(self, db: Database, settings: Settings) -> None:
        self.db = db
        self.keep_seconds = settings.idempotency_key_hours * 3600
        self.max_kept_bytes = settings.project_max_idempotency_bytes
        self.project_max_bytes = settings.project_max_bytes

    async def hold_or_find(self, record: RecordId, is_admin: bool) -> Held | Kept | NotBound:
        """Hold the key (unused, expired, or its holder gone before committing) or return what
        was kept for it; while another request holds it, wait, reading (no write) with backoff."""
        deadline = time.monotonic() + MAX_WAIT_SECONDS
        while True:
            now, owner = time.time(), uuid.uuid4().hex
            async with self.db.write() as session:
                keys = IdempotencyKeyRepository(session)
                await keys.remove_created_before(now - self.keep_seconds, record)
                lease = now + LEASE_SECONDS
                if await keys.insert_locked(record, is_admin, owner, now, lease) or await keys.take_over(
                    record, owner, now, lease
                ):
                    return Held(record, owner)
                row = await keys.get(record)
            delay = FIRST_POLL_SECONDS
            while row is not None and row.locked_until is not None:
                if row.locked_until < time.time():
                    if row.committed:  # its holder died after committing, before keeping anything
                        return Kept(row.fingerprint, 200, "application/json", None, None)
                    break  # its holder died before committing: take it over
                if time.monotonic() > deadline:
                    raise _in_use(record.key)
                await asyncio.sleep(delay)
                delay = min(2 * delay, LONGEST_POLL_SECONDS)
                async with self.db.read() as session:
                    row = await IdempotencyKeyRepository(session).get(record)
            if row is not None and row.locked_until is None and row.created_at >= time.time() - self.keep_seconds:
                return _kept(row) if row.is_admin == is_admin else NotBound()
            # Released, expired or abandoned: try to hold it again.

    @asynccontextmanager
    async def renewing(self, held: Held) -> AsyncIterator[None]:
        """Keep the lease while the block runs (a long upload outlasts one lease); a renewal
        that fails is tried again with backoff, one that finds the lease taken marks `lost`."""

        async def renew_forever() -> None:
            retry = RENEW_RETRY_SECONDS
            wait = LEASE_SECONDS / 3
            while True:
                await asyncio.sleep(wait)
                try:
                    async with self.db.write() as session:
                        still_held = await IdempotencyKeyRepository(session).renew(
                            held.record, held.owner, time.time() + LEASE_SECONDS
                        )
                except Exception as error:  # noqa: BLE001 - a restarting database raises many kinds; keep trying
                    log.warning("could not renew the lease of an Idempotency-Key (retrying in %.1fs): %s", retry, error)
                    wait, retry = retry, min(2 * retry, LONGEST_RENEW_RETRY)
                    continue
                if not still_held:
                    held.lost = True
                    return
                wait, retry = LEASE_SECONDS / 3, RENEW_RETRY_SECONDS

        renewer = asyncio.create_task(renew_forever())
        try:
            yield
        finally:
            renewer.cancel()

    async def finish(
        self,
        held: Held,
        fingerprint: str,
        status_code: int,
        content_type: str,
        body: bytes | None,
        retrieve_path: str | None,
    ) -> None:
        """Keep what a repeat gets: `body` if it fits the project's allowance, else (or for a
        secret) `retrieve_path`; a request that kept neither and committed nothing is forgotten.
        A holder that lost its lease writes nothing: the record is its new holder's."""
        if held.lost:
            return
        async with self.db.write() as session:
            keys = IdempotencyKeyRepository(session)
            if body is not None and not await self._fits(session, held.record.project, len(body)):
                body = None
            if body is None and retrieve_path is None and not held.committed:
                await keys.release(held.record, held.owner)
                return
            await keys.complete(held.record, held.owner, fingerprint, status_code, content_type, body, retrieve_path)

    async def _fits(self, session: AsyncSession, project: str, size: int) -> bool:
        if size > MAX_KEPT_BODY or not self.max_kept_bytes:
            return False
        if await IdempotencyKeyRepository(session).kept_bytes(project) + size > self.max_kept_bytes:
            return False
        if self.project_max_bytes:
            return (
                await QuotaRepository(session).stored_bytes(project, int(time.time())) + size <= self.project_max_bytes
            )
        return True

    async def release(self, held: Held) -> None:
        """Forget the record, unless the route committed a create under it: then a repeat must
        not run it again, and is told nothing was kept."""
        if held.lost:
            return
        async with self.db.write() as session:
            keys = IdempotencyKeyRepository(session)
            if held.committed:
                await keys.complete(held.record, held.owner, "", 200, "application/json", None, None)
            else:
                await keys.release(held.record, held.owner)
