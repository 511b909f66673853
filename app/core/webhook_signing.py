"""Standard Webhooks signatures (what `client.webhooks.unwrap` checks): the secret is `whsec_` +
base64 of random bytes; the signature is `v1,` + base64 HMAC-SHA256 of "{id}.{timestamp}.{body}"."""

from __future__ import annotations

import base64
import hashlib
import hmac
import secrets

SECRET_PREFIX = "whsec_"


def new_secret() -> str:
    return SECRET_PREFIX + base64.b64encode(secrets.token_bytes(32)).decode()


def secret_hint(secret: str) -> str:
    """Enough to tell secrets apart in a listing, too little to sign with."""
    return f"{SECRET_PREFIX}****{secret[-4:]}"


def signature(secret: str, message_id: str, timestamp: int, body: bytes) -> str:
    key = base64.b64decode(secret.removeprefix(SECRET_PREFIX))
    signed = f"{message_id}.{timestamp}.".encode() + body
    return "v1," + base64.b64encode(hmac.new(key, signed, hashlib.sha256).digest()).decode()


def signed_headers(secrets_in_use: list[str], message_id: str, timestamp: int, body: bytes) -> dict[str, str]:
    """Headers for one attempt. Several secrets (during a rotation) give space-separated
    signatures; a receiver accepts any that matches."""
    return {
        "content-type": "application/json",
        "user-agent": "batchd-webhooks",
        "webhook-id": message_id,
        "webhook-timestamp": str(timestamp),
        "webhook-signature": " ".join(signature(s, message_id, timestamp, body) for s in secrets_in_use),
    }
