"""Ids batchd mints outside the database."""

from __future__ import annotations

import uuid


def new_request_id() -> str:
    return f"req_{uuid.uuid4().hex}"
