"""API keys: config keys (BATCHD_API_KEYS) and stored keys (`batchd keys create`).

Stored keys are kept only as HMAC-SHA256(secret, key). Config keys are compared in constant time
over all candidates. With no keys configured anywhere the server runs in open mode."""

from __future__ import annotations

import hashlib
import hmac
import logging
import os
import secrets
import string
import time
from pathlib import Path

from app.config import DEFAULT_PROJECT, Settings
from app.db.engine import Database
from app.db.models import ApiKey
from app.db.repositories.api_keys import ApiKeyRepository
from app.errors import Unauthorized

log = logging.getLogger("batchd.auth")

KEY_PREFIX = "bd-"
KEY_ALPHABET = string.ascii_letters + string.digits
# Stored keys can appear while the server runs (`batchd keys create` is another process), so
# "are there any?" is re-asked at most this often.
KEY_COUNT_TTL_SECONDS = 5.0


def load_secret(settings: Settings) -> bytes:
    if settings.secret_key:
        return settings.secret_key.encode()
    path = Path(settings.data_dir) / "secret.key"
    if not path.exists():
        path.parent.mkdir(parents=True, exist_ok=True)
        fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
        with os.fdopen(fd, "w") as fh:
            fh.write(secrets.token_hex(32))
    return path.read_text().strip().encode()


def generate_key() -> str:
    return KEY_PREFIX + "".join(secrets.choice(KEY_ALPHABET) for _ in range(40))


def key_hash(secret: bytes, key: str) -> str:
    return hmac.new(secret, key.encode(), hashlib.sha256).hexdigest()


def _masked(key: str) -> str:
    return f"{key[:6]}***{key[-4:]}" if len(key) > 12 else "***"


class Authenticator:
    def __init__(self, settings: Settings, db: Database) -> None:
        self.db = db
        self.secret = load_secret(settings)
        self.config_keys = [
            (hashlib.sha256(key.encode()).digest(), project)
            for key, project in settings.parsed_api_keys().items()
        ]
        self._stored_count: tuple[float, int] | None = None

    async def _has_stored_keys(self) -> bool:
        now = time.monotonic()
        if self._stored_count is None or now - self._stored_count[0] > KEY_COUNT_TTL_SECONDS:
            async with self.db.read() as session:
                self._stored_count = (now, await ApiKeyRepository(session).count_active())
        return self._stored_count[1] > 0

    async def is_open_mode(self) -> bool:
        return not self.config_keys and not await self._has_stored_keys()

    async def project_for(self, authorization: str | None) -> str:
        """The project an Authorization header belongs to, or Unauthorized."""
        if await self.is_open_mode():
            return DEFAULT_PROJECT
        scheme, _, key = (authorization or "").partition(" ")
        key = key.strip()
        if scheme.lower() != "bearer" or not key:
            raise Unauthorized(
                "You didn't provide an API key. You need to provide your API key in an "
                "Authorization header using Bearer auth (i.e. Authorization: Bearer YOUR_KEY).",
            )
        digest = hashlib.sha256(key.encode()).digest()
        match: str | None = None
        for candidate, project in self.config_keys:
            if secrets.compare_digest(digest, candidate):
                match = project
        if match is None:
            async with self.db.read() as session:
                match = await ApiKeyRepository(session).project_for_hash(key_hash(self.secret, key))
        if match is None:
            raise Unauthorized(f"Incorrect API key provided: {_masked(key)}.", code="invalid_api_key")
        return match


async def create_stored_key(settings: Settings, db: Database, project: str) -> str:
    """Create a key for `project`, store its hash and return the key (shown once)."""
    key = generate_key()
    async with db.write() as session:
        await ApiKeyRepository(session).add(
            ApiKey(
                key_hash=key_hash(load_secret(settings), key),
                prefix=key[:8],
                project=project,
                created_at=int(time.time()),
            )
        )
    return key
