"""A throwaway Postgres database per test session (Postgres on 127.0.0.1:5432, trust auth)."""

from __future__ import annotations

import asyncio
import os
import uuid

import asyncpg

ADMIN_DSN = os.environ.get("BATCHD_TEST_POSTGRES_DSN", "postgresql://postgres@127.0.0.1:5432/postgres")


async def _admin(sql: str) -> None:
    conn = await asyncpg.connect(ADMIN_DSN, timeout=5)
    try:
        await conn.execute(sql)
    finally:
        await conn.close()


def create_database() -> str:
    """Create an empty database and return its SQLAlchemy URL."""
    name = f"batchd_test_{uuid.uuid4().hex[:12]}"
    asyncio.run(_admin(f'CREATE DATABASE "{name}"'))
    base = ADMIN_DSN.rsplit("/", 1)[0].replace("postgresql://", "postgresql+asyncpg://", 1)
    return f"{base}/{name}"


def drop_database(url: str) -> None:
    name = url.rsplit("/", 1)[1]
    asyncio.run(_admin(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)'))
