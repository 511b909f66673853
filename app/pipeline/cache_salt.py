"""Each project's prompt cache apart: the ``cache_salt`` batchd puts on every line it sends.

vLLM shares cached prompt prefixes between requests, and a reused prefix shows: in
``usage.prompt_tokens_details.cached_tokens`` and in how fast the line answers. Two projects on
one engine could thus learn whether the other recently sent a given prefix. vLLM keys its prefix
cache by the request's ``cache_salt`` as well, so every line carries its project's own salt
(replacing any the caller sent): prefixes are shared within a project, never across projects.

The salt is HMAC-SHA256(key, project id), URL-safe base64 (43 characters; vLLM refuses ``/``).
The key is ``BATCHD_CACHE_SALT_SECRET`` or, by default, derived from the key-hashing secret
(``BATCHD_SECRET_KEY`` or ``<data-dir>/secret.key``), which every replica already shares and
keeps across restarts: replicas salt a project's lines alike, so its prefixes stay shared
between them, and a guess of the salt needs the server's secret.
"""

from __future__ import annotations

import base64
import hashlib
import hmac
from typing import Any

from app.core.endpoints import (
    CHAT_COMPLETIONS,
    COMPLETIONS,
    EMBEDDINGS,
    MESSAGES,
    RERANK,
    RESPONSES,
    SCORE,
    normalize_endpoint,
)
from app.engine.protocol import LineRunner
from app.engine.results import LineResult
from app.scheduling.residency import NO_DEADLINE, Urgency

# The endpoints whose vLLM request types take `cache_salt` (vLLM 0.32; audio's do not, and
# would refuse the field). tests/engine/local/test_cache_salt_types.py holds
# this to vLLM's own types.
SALTED_ENDPOINTS: frozenset[str] = frozenset(
    {CHAT_COMPLETIONS, COMPLETIONS, RESPONSES, MESSAGES, EMBEDDINGS, SCORE, RERANK}
)
_DERIVATION = b"batchd cache_salt v1"


def salt_key(server_secret: bytes) -> bytes:
    """The salts' key, derived from a server secret (a key of its own: a salt never reveals it)."""
    return hmac.new(server_secret, _DERIVATION, hashlib.sha256).digest()


def project_salt(key: bytes, project: str) -> str:
    """The project's ``cache_salt``: the same on every replica and after a restart."""
    digest = hmac.new(key, project.encode(), hashlib.sha256).digest()
    return base64.urlsafe_b64encode(digest).rstrip(b"=").decode()


def salted_body(endpoint: str, body: Any, salt: str) -> Any:
    """The body as it goes to the engine: ``cache_salt`` is the project's, whatever it said."""
    if normalize_endpoint(endpoint) not in SALTED_ENDPOINTS or not isinstance(body, dict):
        return body
    return {**body, "cache_salt": salt}


class SaltedRunner:
    """A LineRunner that sends every line with its project's ``cache_salt``."""

    def __init__(self, runner: LineRunner, salt: str) -> None:
        self.runner = runner
        self.salt = salt

    async def execute(
        self, endpoint: str, body: Any, request_id: str, priority: int = 0, *, urgency: Urgency = NO_DEADLINE
    ) -> LineResult:
        return await self.runner.execute(
            endpoint, salted_body(endpoint, body, self.salt), request_id, priority, urgency=urgency
        )

    async def abort(self, request_id: str) -> bool:
        return await self.runner.abort(request_id)
