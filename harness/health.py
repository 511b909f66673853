"""`/health` as an admin key reads it: with its details (upstream URLs' states), which anyone
else is not shown. A server whose details are read is started with ADMIN_ENV."""

from __future__ import annotations

import httpx

from harness.client import tls_context
from harness.server import ServerProcess

ADMIN_KEY = "key-health-admin"
ADMIN_ENV = {"BATCHD_ADMIN_KEYS": ADMIN_KEY}
ADMIN_HEADERS = {"Authorization": f"Bearer {ADMIN_KEY}"}


def health_details(server: ServerProcess, timeout: float = 10) -> dict:
    response = httpx.get(
        f"http://127.0.0.1:{server.port}/health", headers=ADMIN_HEADERS, timeout=timeout, verify=tls_context()
    )
    return response.json()
