"""Idempotency-Key: a POST repeated with the same key (the caller's project's) gets the first
response again instead of doing the work twice: an orchestrator that retries a timed-out create
makes one batch, not two. The rules:

- The first request holds the key while it runs (a lease it renews; a dead replica's lapses), and
  keeps its response once it succeeds (2xx). An error is not kept: a retry runs again.
- A repeat waits while the key is held (a concurrent duplicate, on any replica), then gets the
  kept response if it is the same request (same fingerprint), else 409.
- A key is kept `idempotency_key_hours` after its first use; older, it is as if never used."""

from __future__ import annotations

import asyncio
import time
import uuid
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from dataclasses import dataclass

from app.core.errors import Conflict, InvalidRequest
from app.db.engine import Database
from app.db.repositories.idempotency_keys import IdempotencyKeyRepository

HEADER = "idempotency-key"
MAX_KEY_LENGTH = 255
# A holder renews its lease every third of it; a key whose holder died is free after it.
LEASE_SECONDS = 60.0
POLL_SECONDS = 0.2
# A repeat waits this long for the first request at most (a large upload's time), then gets a 409.
MAX_WAIT_SECONDS = 600.0


@dataclass(frozen=True)
class Held:
    """This request holds the key: it runs, then completes or releases it."""

    project: str
    key: str
    owner: str


@dataclass(frozen=True)
class Kept:
    """The response the first request with this key gave."""

    fingerprint: str
    status_code: int
    content_type: str
    body: bytes


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


class IdempotentRequests:
    def __init__(self, db: Database, keep_seconds: float) -> None:
        self.db = db
        self.keep_seconds = keep_seconds

    async def hold_or_find(self, project: str, key: str) -> Held | Kept:
        """Hold the key (unused, expired, or its holder gone) or return the response kept for it;
        while another request holds it, wait."""
        deadline = time.monotonic() + MAX_WAIT_SECONDS
        while True:
            now, owner = time.time(), uuid.uuid4().hex
            async with self.db.write() as session:
                keys = IdempotencyKeyRepository(session)
                await keys.remove_created_before(now - self.keep_seconds, project, key)
                if await keys.insert_locked(project, key, owner, now, now + LEASE_SECONDS) or await keys.take_over(
                    project, key, owner, now, now + LEASE_SECONDS
                ):
                    return Held(project, key, owner)
                row = await keys.get(project, key)
            if row is not None and row.locked_until is None:
                assert row.fingerprint is not None and row.status_code is not None and row.body is not None
                return Kept(row.fingerprint, row.status_code, row.content_type or "application/json", row.body)
            if time.monotonic() > deadline:
                raise Conflict(
                    f"A request with Idempotency-Key '{key}' is still being processed; retry later.",
                    param=HEADER,
                    code="idempotency_key_in_use",
                )
            await asyncio.sleep(POLL_SECONDS)

    @asynccontextmanager
    async def renewing(self, held: Held) -> AsyncIterator[None]:
        """Keep the lease while the block runs (a long upload outlasts one lease)."""

        async def renew_forever() -> None:
            while True:
                await asyncio.sleep(LEASE_SECONDS / 3)
                async with self.db.write() as session:
                    await IdempotencyKeyRepository(session).renew(
                        held.project, held.key, held.owner, time.time() + LEASE_SECONDS
                    )

        renewer = asyncio.create_task(renew_forever())
        try:
            yield
        finally:
            renewer.cancel()

    async def complete(self, held: Held, fingerprint: str, status_code: int, content_type: str, body: bytes) -> None:
        async with self.db.write() as session:
            await IdempotencyKeyRepository(session).complete(
                held.project, held.key, held.owner, fingerprint, status_code, content_type, body
            )

    async def release(self, held: Held) -> None:
        async with self.db.write() as session:
            await IdempotencyKeyRepository(session).release(held.project, held.key, held.owner)
