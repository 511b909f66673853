"""Direct access to a server's database, for assertions, fault injection and reports only."""

from __future__ import annotations

import asyncio
from typing import cast

from sqlalchemy import CursorResult, text

from app.db.engine import Database
from harness.server import ServerProcess


def database_url(server: ServerProcess) -> str:
    return server.database_url or f"sqlite+aiosqlite:///{(server.data_dir / 'batchd.db').resolve()}"


def execute(server: ServerProcess, sql: str, **params) -> list[tuple]:
    """Run one statement in its own transaction and return the rows (if any)."""

    async def run() -> list[tuple]:
        db = Database(database_url(server))
        try:
            async with db.write() as session:
                result = await session.execute(text(sql), params)
                return [tuple(row) for row in result] if cast(CursorResult, result).returns_rows else []
        finally:
            await db.dispose()

    return asyncio.run(run())
