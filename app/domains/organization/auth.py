"""API keys: config keys (BATCHD_API_KEYS) and stored keys (`batchd keys create | list | revoke`).

Stored keys are kept only as HMAC-SHA256(secret, key) and looked up by that hash on every
request (no cache), so a revocation holds on every replica sharing the database at once; the
lookup is one indexed read. Config keys are compared in constant time over all candidates. A
key is never logged: failures show a masked form. With no keys configured anywhere (none ever
stored, revoked ones included) the server runs in open mode."""

from __future__ import annotations

import hashlib
import hmac
import logging
import os
import secrets
import string
import time
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path

from sqlalchemy.ext.asyncio import AsyncSession
from starlette.applications import Starlette

from app.core.config import DEFAULT_PROJECT, Settings
from app.core.errors import TooManyRequests, Unauthorized
from app.core.private_files import PRIVATE_FILE_MODE, create_private_file, private_dir, tighten
from app.db.engine import Database
from app.db.models import ApiKey, Project
from app.domains.organization.api_keys_repository import ApiKeyRepository
from app.domains.organization.audit_log import record
from app.domains.organization.auth_throttle import FailedAuthThrottle
from app.domains.organization.projects_repository import ProjectRepository

log = logging.getLogger("batchd.auth")

KEY_PREFIX = "bd-"
KEY_ALPHABET = string.ascii_letters + string.digits
# Stored keys can appear while the server runs (`batchd keys create` is another process), so
# "are there any?" is re-asked at most this often.
KEY_COUNT_TTL_SECONDS = 5.0
# The code of a refused key (a missing one has none: no key is not a failed check).
INVALID_KEY = "invalid_api_key"
# The 429's words for the allowance that is spent (FailedAuthThrottle.refused).
THROTTLED_BY = {"address": "from this address", "key": "with this key's prefix"}


def load_secret(settings: Settings) -> bytes:
    if settings.secret_key:
        return settings.secret_key.encode()
    path = Path(settings.data_dir) / "secret.key"
    if path.exists():
        tighten(path, PRIVATE_FILE_MODE)
    else:
        private_dir(path.parent)
        with os.fdopen(create_private_file(path), "w") as fh:
            fh.write(secrets.token_hex(32))
    return path.read_text().strip().encode()


def generate_key() -> str:
    return KEY_PREFIX + "".join(secrets.choice(KEY_ALPHABET) for _ in range(40))


def key_hash(secret: bytes, key: str) -> str:
    return hmac.new(secret, key.encode(), hashlib.sha256).hexdigest()


def _presented_key(authorization: str | None) -> str:
    """The key of a Bearer Authorization header, or Unauthorized (no key: not a failed check)."""
    scheme, _, key = (authorization or "").partition(" ")
    key = key.strip()
    if scheme.lower() != "bearer" or not key:
        raise Unauthorized(
            "You didn't provide an API key. You need to provide your API key in an "
            "Authorization header using Bearer auth (i.e. Authorization: Bearer YOUR_KEY).",
        )
    return key


def _masked(key: str) -> str:
    return f"{key[:6]}***{key[-4:]}" if len(key) > 12 else "***"


@dataclass(frozen=True)
class Caller:
    """Who sent a request: the key's project, whether it is an admin key (Usage and
    Administration APIs), and the key's wire id (`key_<n>` for stored keys, `key_cfg_<hash>` for
    config keys; None in open mode) that the audit log names as the actor and under which its
    batches' usage is booked. `open_mode`: no key configured, the operator on this machine."""

    project: str
    is_admin: bool = False
    key_id: str | None = None
    open_mode: bool = False


def stored_key_id(row_id: int) -> str:
    return f"key_{row_id}"


def parse_stored_key_id(key_id: str) -> int | None:
    """The row id of a `key_<n>` wire id; None for anything else (or a number no INTEGER holds)."""
    number = key_id.removeprefix("key_")
    return int(number) if number != key_id and number.isascii() and number.isdigit() and len(number) <= 9 else None


class Authenticator:
    def __init__(self, settings: Settings, db: Database) -> None:
        self.db = db
        self.secret = load_secret(settings)
        self.config_keys = [
            (hashlib.sha256(key.encode()).digest(), project, False)
            for key, project in settings.parsed_api_keys().items()
        ] + [(hashlib.sha256(key.encode()).digest(), DEFAULT_PROJECT, True) for key in settings.parsed_admin_keys()]
        self._stored_count: tuple[float, bool] | None = None
        self.throttle = FailedAuthThrottle(settings.auth_failure_burst, settings.auth_failure_window_seconds)

    async def _has_stored_keys(self) -> bool:
        now = time.monotonic()
        if self._stored_count is None or now - self._stored_count[0] > KEY_COUNT_TTL_SECONDS:
            self._stored_count = (now, await any_key_stored(self.db))
        return self._stored_count[1]

    async def is_open_mode(self) -> bool:
        return not self.config_keys and not await self._has_stored_keys()

    async def caller_for(self, authorization: str | None, address: str) -> Caller:
        """Who an Authorization header sent from `address` is, or Unauthorized. The key is always
        checked: a good one is served whatever its address has done; a bad one is TooManyRequests
        while its address or its prefix has failed too often (auth_throttle.py). In open mode
        everyone is the operator: the default project, with admin rights (there is no key to
        tell anyone apart)."""
        if await self.is_open_mode():
            return Caller(DEFAULT_PROJECT, is_admin=True, open_mode=True)
        key = _presented_key(authorization)
        match = await self._match(key)
        if match is not None:
            return match
        throttled = self.throttle.refused(address, key)
        if throttled is None:
            raise Unauthorized(f"Incorrect API key provided: {_masked(key)}.", code=INVALID_KEY)
        what, retry_after = throttled
        raise TooManyRequests(
            f"Too many requests with an invalid API key {THROTTLED_BY[what]}; retry in {retry_after} s "
            "(a valid key is served meanwhile).",
            retry_after=retry_after,
        )

    async def _match(self, key: str) -> Caller | None:
        """The caller `key` names, or None (unknown, revoked, or its project archived)."""
        digest = hashlib.sha256(key.encode()).digest()
        match: Caller | None = None
        for candidate, project, admin in self.config_keys:
            if secrets.compare_digest(digest, candidate):
                # A keyed hash: the audit log can tell config keys apart without a guessable digest.
                match = Caller(project, admin, f"key_cfg_{key_hash(self.secret, key)[:12]}")
        async with self.db.read() as session:
            if match is None:
                owner = await ApiKeyRepository(session).owner_of_hash(key_hash(self.secret, key))
                if owner is not None:
                    match = Caller(owner.project, owner.is_admin, stored_key_id(owner.id))
            # An archived project's keys stop at once, on every replica: read, not cached.
            elif not match.is_admin and await ProjectRepository(session).is_archived(match.project):
                match = None
        return match


async def any_key_stored(db: Database) -> bool:
    """Whether any key was ever stored (revoked keys count: revoking the last key must lock the
    server, not open it)."""
    async with db.read() as session:
        return await ApiKeyRepository(session).count_all() > 0


async def add_key(
    session: AsyncSession, secret: bytes, project: str, *, admin: bool = False, name: str | None = None
) -> tuple[ApiKey, str]:
    """Store a new key's hash in the session's unit of work; returns the row and the key (shown
    once). A project key's project gets a row, so the Administration API lists it."""
    key = generate_key()
    now = int(time.time())
    if not admin:
        projects = ProjectRepository(session)
        if await projects.get(project) is None:
            await projects.save(Project(name=project, weight=1, created_at=now, updated_at=now))
    row = await ApiKeyRepository(session).add(
        ApiKey(
            key_hash=key_hash(secret, key), prefix=key[:8], project=project, created_at=now, is_admin=admin, name=name
        )
    )
    return row, key


async def create_stored_key(settings: Settings, db: Database, project: str, admin: bool = False) -> str:
    """Create a key for `project` (an admin key when `admin`), store its hash and return the key (shown once)."""
    async with db.write() as session:
        row, key = await add_key(session, load_secret(settings), project, admin=admin)
        await record(session, None, "api_key.created", stored_key_id(row.id), None if admin else project)
    return key


@dataclass
class StoredKeyInfo:
    """What `batchd keys list` shows of a stored key: never the key or its hash."""

    id: int
    project: str
    created_at: int
    revoked_at: int | None
    is_admin: bool = False

    def line(self) -> str:
        state = f"revoked {_iso(self.revoked_at)}" if self.revoked_at else "active"
        return f"{self.id}\t{self.project}\t{_iso(self.created_at)}\t{state}" + ("\tadmin" if self.is_admin else "")


def _iso(timestamp: int) -> str:
    return datetime.fromtimestamp(timestamp, tz=UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


async def list_stored_keys(db: Database) -> list[StoredKeyInfo]:
    async with db.read() as session:
        rows = await ApiKeyRepository(session).list_all()
    return [StoredKeyInfo(r.id, r.project, r.created_at, r.revoked_at, r.is_admin) for r in rows]


async def revoke_stored_key(db: Database, key_id: int) -> bool:
    """Revoke a stored key by id; False when there is no such key."""
    async with db.write() as session:
        keys = ApiKeyRepository(session)
        row = await keys.get(key_id)
        if row is None:
            return False
        if row.revoked_at is None:
            await keys.revoke(key_id, int(time.time()))
            await record(session, None, "api_key.deleted", stored_key_id(key_id), None if row.is_admin else row.project)
        return True


def install_authenticator(app: Starlette, auth: Authenticator) -> None:
    """The app's one Authenticator (its lifespan makes it): the front door and the admin routes read it."""
    app.state.authenticator = auth


def authenticator_of(app: Starlette) -> Authenticator:
    auth = app.state.authenticator
    assert isinstance(auth, Authenticator), "the app's lifespan installs the authenticator before serving"
    return auth
